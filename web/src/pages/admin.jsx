// Placeholder: being written.
export function AdminPage() {
  return <h1>admin</h1>;
}
