// One action's life: busy while the request runs, the server's error kept for display next to
// the form, and a callback (usually reload()) after success; and the button and the form that
// run a request through it.
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

// A button that runs `run` through `act`: disabled while any request of that action runs, and
// asking first where `confirm` says what it will do.
export function ActionButton({ act, run, confirm, disabled, children, ...props }) {
  return (
    <button
      type="button"
      {...props}
      disabled={act.busy || !!disabled}
      onClick={() => {
        if (!confirm || window.confirm(confirm)) act.run(run);
      }}
    >
      {children}
    </button>
  );
}

// A form whose submit runs `run` through `act`.
export function ActionForm({ act, run, children, ...props }) {
  return (
    <form
      {...props}
      onSubmit={(e) => {
        e.preventDefault();
        act.run(run);
      }}
    >
      {children}
    </form>
  );
}
