// Placeholder: being written.
export function HostsPage() {
  return <h1>hosts</h1>;
}
