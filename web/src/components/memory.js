// Memory sizes as people type them, for forms that send the API's `memory_mib`.

// "512", "512Mi", "16Gi", "1.5 G" -> MiB (a bare number is MiB). Anything else comes back as
// typed, so the server's answer names the field instead of the form guessing.
export function parseMemory(text) {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(m|mi|mib|g|gi|gib)?\s*$/i.exec(text);
  if (!m) return text;
  const n = Number(m[1]);
  return Math.round(/^g/i.test(m[2] ?? '') ? n * 1024 : n);
}

// 16384 -> "16 Gi", 1536 -> "1536 Mi".
export function fmtMib(mib) {
  return mib % 1024 === 0 ? `${mib / 1024} Gi` : `${mib} Mi`;
}
