// Placeholder: being written.
export function UsagePage() {
  return <h1>usage</h1>;
}
