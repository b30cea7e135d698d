// Placeholder: being written.
export function WorkPage() {
  return <h1>work</h1>;
}
