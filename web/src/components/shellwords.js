// Splits a command line into argv the way a shell would for the simple cases: words separated by
// spaces, 'single quotes' taken literally, "double quotes" with \" \\ \$ \` escapes, and a
// backslash outside quotes escaping the next character. No variables, globs or pipes: the job
// runs the program directly (wrap it in sh -c '...' for those).
export function splitCommand(line) {
  const out = [];
  let word = '';
  let inWord = false;
  let i = 0;
  while (i < line.length) {
    const c = line[i];
    if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new Error('command: unterminated single quote');
      word += line.slice(i + 1, end);
      inWord = true;
      i = end + 1;
    } else if (c === '"') {
      i++;
      for (;;) {
        if (i >= line.length) throw new Error('command: unterminated double quote');
        const d = line[i];
        if (d === '"') break;
        if (d === '\\' && i + 1 < line.length && '"\\$`'.includes(line[i + 1])) {
          word += line[i + 1];
          i += 2;
        } else {
          word += d;
          i++;
        }
      }
      inWord = true;
      i++;
    } else if (c === '\\' && i + 1 < line.length) {
      word += line[i + 1];
      inWord = true;
      i += 2;
    } else if (/\s/.test(c)) {
      if (inWord) out.push(word);
      word = '';
      inWord = false;
      i++;
    } else {
      word += c;
      inWord = true;
      i++;
    }
  }
  if (inWord) out.push(word);
  return out;
}
