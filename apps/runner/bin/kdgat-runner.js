#!/usr/bin/env node
// Entry point: Node 24 runs the TypeScript sources directly (type stripping).
import process from 'node:process';
import { main } from '../src/cli/main.ts';

process.exitCode = await main(process.argv.slice(2));
