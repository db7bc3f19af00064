# One image for every role (ROLE selects it at run time). The TypeScript is compiled in a build stage
# (`npm run build`): node runs the JavaScript itself, which starts in about half the time of tsx.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY projections ./projections
RUN npm run build

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force
COPY --from=build /app/dist ./dist
RUN mkdir -p /data && chown node:node /data
USER node
ENV PORT=8080 HOST=0.0.0.0 DATA_DIR=/data
EXPOSE 8080
CMD ["node", "dist/src/main.js"]
