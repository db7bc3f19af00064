#!/usr/bin/env node
// The npm bin: runs the TypeScript sources through tsx, as `npm start` does.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
main(process.argv.slice(2));
