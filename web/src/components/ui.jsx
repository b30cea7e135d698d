// Small pieces every page uses.

export function ErrorNote({ error }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error.message ?? String(error)}
      {error.field ? ` (field: ${error.field})` : ''}
    </p>
  );
}

export function Loading({ what = '' }) {
  return <p class="loading">Loading{what ? ` ${what}` : ''}…</p>;
}

export function Empty({ children }) {
  return <p class="empty">{children}</p>;
}

export function StateBadge({ state }) {
  return <span class={`badge state-${state}`}>{state}</span>;
}

// A labelled form field: <Field label="GPUs"><input .../></Field>
export function Field({ label, hint, children }) {
  return (
    <label class="field">
      <span>{label}</span>
      {children}
      {hint && <small>{hint}</small>}
    </label>
  );
}

// An input bound to a state setter: <TextInput name="reason" value={reason} set={setReason} />.
export function TextInput({ set, ...props }) {
  return <input {...props} onInput={(e) => set(e.currentTarget.value)} />;
}
