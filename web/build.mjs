// npm run build [-- OUTDIR]   (or AT_WEB_OUT=OUTDIR): bundle src/translate.js (and its stylesheet,
// src/translate.css, as text) with esbuild, and
// write a gzip copy of onnxruntime-web's ort-wasm-simd-threaded.wasm next to it (the page
// decompresses it with DecompressionStream). Default OUTDIR: web/dist/.
import * as esbuild from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(process.argv[2] || process.env.AT_WEB_OUT || path.join(here, 'dist'));
fs.mkdirSync(out, { recursive: true });
await esbuild.build({
  entryPoints: [path.join(here, 'src', 'translate.js')],
  bundle: true, format: 'esm', splitting: true, minify: true, sourcemap: false,
  target: ['es2020'], outdir: out, entryNames: '[name]', chunkNames: 'chunks/[name]-[hash]',
  logLevel: 'warning', legalComments: 'eof',
  loader: { '.css': 'text' },          // translate.css: the page adds it as a <style>
});
const wasm = fs.readFileSync(path.join(here, 'node_modules', 'onnxruntime-web', 'dist', 'ort-wasm-simd-threaded.wasm'));
const gz = zlib.gzipSync(wasm, { level: 9 });
fs.writeFileSync(path.join(out, 'ort-wasm-simd-threaded.wasm.gz'), gz);
let total = 0;
for (const f of fs.readdirSync(out, { recursive: true })) {
  const p = path.join(out, f);
  if (fs.statSync(p).isFile()) { total += fs.statSync(p).size; console.log(`${f}\t${fs.statSync(p).size}`); }
}
console.log(`${out}: ${total} bytes (wasm ${wasm.length} -> ${gz.length} gzipped)`);
