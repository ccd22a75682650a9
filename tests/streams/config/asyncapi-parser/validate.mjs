// Validates an AsyncAPI document (a file, or standard input) with the reference parser.
// Prints the diagnostics as JSON; exits 1 if any is an error.
import { readFileSync } from "node:fs";
import { Parser } from "@asyncapi/parser";

const source = readFileSync(process.argv[2] ?? 0, "utf8");
const { document, diagnostics } = await new Parser().parse(source);
const errors = diagnostics.filter((d) => d.severity === 0);
console.log(JSON.stringify({
  valid: document !== undefined && errors.length === 0,
  errors: errors.map((d) => ({ message: d.message, path: d.path })),
  warnings: diagnostics.filter((d) => d.severity !== 0).map((d) => ({ message: d.message, path: d.path })),
}, null, 1));
process.exit(errors.length ? 1 : 0);
