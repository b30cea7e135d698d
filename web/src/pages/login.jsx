// The login page: a local or directory (LDAP) account; allotd decides which.
import { useState } from 'preact/hooks';
import { login, whoami } from '../api.js';
import { TextInput } from '../components/ui.jsx';
import { sessionLinkToFollow } from '../session.js';

export function LoginPage({ expired, onLogin }) {
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);

  async function submit(ev) {
    ev.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await login(user.trim(), password);
      onLogin(await whoami());
    } catch (e) {
      setError(e.status === 429 ? `${e.message} (too many attempts)` : e.message);
      setPassword('');
    } finally {
      setBusy(false);
    }
  }

  return (
    <main class="login" id="main">
      <form onSubmit={submit} aria-labelledby="login-title">
        <h1 id="login-title">Allot</h1>
        {sessionLinkToFollow() && !expired && (
          <p class="note" role="status" data-testid="login-for-session">
            Log in to open the session you followed a link to.
          </p>
        )}
        {expired && (
          <p class="note" role="status">
            Your session has ended. Please log in again.
          </p>
        )}
        <label>
          User
          <TextInput
            name="user"
            autoComplete="username"
            autoFocus
            required
            value={user}
            set={setUser}
          />
        </label>
        <label>
          Password
          <TextInput
            name="password"
            type="password"
            autoComplete="current-password"
            required
            value={password}
            set={setPassword}
          />
        </label>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          {busy ? 'Logging in…' : 'Log in'}
        </button>
      </form>
    </main>
  );
}
