#!/usr/bin/env node
// task-service-verify --base-url URL: runs the contract tests against a running service and prints
// a PASS/FAIL line per operation; exits 1 when any failed.
import process from 'node:process';
import { parseArgs } from 'node:util';
import { verify } from './verify.js';

const USAGE =
  'Usage: task-service-verify --base-url https://tasks.example.com   (self-registration must be enabled there)';

const { values } = parseArgs({ options: { 'base-url': { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
const baseUrl = values['base-url'];
if (values.help || !baseUrl) {
  console.log(USAGE);
  process.exit(values.help ? 0 : 2);
}
const report = await verify({ baseUrl, log: (line) => console.log(line) });
const failed = report.results.filter((result) => !result.passed).length;
console.log(
  failed === 0
    ? `All ${report.results.length} operations conform to the contract.`
    : `${failed} of ${report.results.length} operations failed.`,
);
process.exitCode = failed === 0 ? 0 : 1;
