# One image for every role (ROLE selects it at run time); the TypeScript runs through tsx.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force
COPY tsconfig.json ./
COPY src ./src
COPY projections ./projections
RUN mkdir -p /data && chown node:node /data
USER node
ENV PORT=8080 HOST=0.0.0.0 DATA_DIR=/data
EXPOSE 8080
CMD ["npx", "tsx", "src/main.ts"]
