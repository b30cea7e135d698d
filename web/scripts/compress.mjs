// Writes a .gz sibling next to each text asset of the build, so allotd can send it as it is
// (Content-Encoding: gzip) without compressing on every request. Prints the gzipped sizes.
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { gzipSync, constants } from 'node:zlib';

const root = process.argv[2] ?? 'dist';
const compressible = /\.(html|js|mjs|css|svg|json|txt|map)$/;
let firstLoad = 0;

function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      walk(path);
      continue;
    }
    if (!compressible.test(name)) continue;
    const gz = gzipSync(readFileSync(path), { level: constants.Z_BEST_COMPRESSION });
    writeFileSync(`${path}.gz`, gz);
    firstLoad += gz.length;
    console.log(`${relative(root, path).padEnd(40)} ${(gz.length / 1024).toFixed(1)} KB gzipped`);
  }
}

walk(root);
console.log(`all of it: ${(firstLoad / 1024).toFixed(1)} KB gzipped (a first load fetches less: pages are lazy chunks)`);
