#!/usr/bin/env node
// `npx ferry …` straight from the TypeScript sources: tsx compiles them on load, so no build step is needed.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../client/cli.ts');
await main();
