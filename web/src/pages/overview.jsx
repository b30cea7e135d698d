// Placeholder: being written.
export function OverviewPage() {
  return <h1>overview</h1>;
}
