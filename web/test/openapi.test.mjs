// The published API description (src/api/openapi.json, served at /api/v1/openapi.json) as a
// platform engineer uses it on day one: a standard validator accepts it, and a client generator
// turns it into types that a strict TypeScript compile takes. The route table's match with it is
// checked in C++ (src/api/openapi_test.cc).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';

const documentPath = resolve(import.meta.dirname, '..', '..', 'src', 'api', 'openapi.json');
const load = () => JSON.parse(readFileSync(documentPath, 'utf8'));

test('a standard validator (@apidevtools/swagger-parser) accepts the document', async () => {
  const doc = load();
  try {
    await SwaggerParser.validate(doc);
  } catch (e) {
    assert.fail(`${e.message.split('\n').slice(0, 20).join('\n')}\n(${e.details?.length} errors)`);
  }
  assert.match(doc.openapi, /^3\.0\.\d+$/);
});

test('openapi-typescript generates a client whose types a strict compile accepts', async () => {
  const source = astToString(await openapiTS(load()));
  assert.match(source, /"\/api\/v1\/jobs": \{/);
  const dir = mkdtempSync(join(tmpdir(), 'allot-openapi-'));
  try {
    writeFileSync(join(dir, 'allot.d.ts'), source);
    // What a client writes: a job's fields, a submission's body and an error's shape.
    writeFileSync(
      join(dir, 'client.ts'),
      `import type { paths, components } from './allot';
type Job = paths['/api/v1/jobs/{id}']['get']['responses'][200]['content']['application/json'];
type Submit = NonNullable<paths['/api/v1/jobs']['post']['requestBody']>['content']['application/json'];
type ApiError = components['schemas']['Error'];
export function describe(job: Job, body: Submit, err: ApiError): string {
  return String(job.id) + String(body.command) + String(err.error?.message);
}
`,
    );
    const program = ts.createProgram([join(dir, 'client.ts')], {
      noEmit: true,
      strict: true,
      target: ts.ScriptTarget.ES2022,
      moduleResolution: ts.ModuleResolutionKind.Node10,
    });
    const problems = ts
      .getPreEmitDiagnostics(program)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    assert.deepEqual(problems, []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
