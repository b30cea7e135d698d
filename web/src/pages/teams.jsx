// Placeholder: being written.
export function TeamsPage() {
  return <h1>teams</h1>;
}
