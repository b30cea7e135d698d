// Placeholder: being written.
export function QueuePage() {
  return <h1>queue</h1>;
}
