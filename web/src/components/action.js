// One action button's life: busy while the request runs, the server's error kept for display
// next to the form, and a callback (usually reload()) after success.
import { useState } from 'preact/hooks';

export function useAction(onDone) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const run = async (fn) => {
    setBusy(true);
    setError(null);
    try {
      const out = await fn();
      if (onDone) onDone(out);
      return out;
    } catch (e) {
      setError(e);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run, setError };
}
