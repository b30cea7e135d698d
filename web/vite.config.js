// The console's build: Preact through its Vite preset, hashed assets under /assets/ (allotd
// caches those for a year and index.html never), no source maps in the shipped bundle.
import { defineConfig } from 'vite';
import preact from '@preact/preset-vite';

export default defineConfig({
  plugins: [preact()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 400,
  },
  server: {
    // `npm run dev` against a local allotd (make run): the API and the event stream go through.
    proxy: { '/api': process.env.ALLOT_SERVER ?? 'http://127.0.0.1:7070' },
  },
});
