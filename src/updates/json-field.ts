// One top-level field of a JSON object text, read without parsing the text: the export needs a
// single field of each event's data (the one its `_links` come from), and parsing the whole data
// into objects cost it more than anything else it does per event. Only texts as JSON.stringify
// writes them (no whitespace, keys without escapes written as they are), which is how the log
// stores event data.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN = new Set([0x7b, 0x5b]);
const CLOSE = new Set([0x7d, 0x5d]);

/** The index of the quote that closes the string whose opening quote is at `start`. */
const stringEnd = (json: string, start: number): number => {
  for (let quote = json.indexOf('"', start + 1); ; quote = json.indexOf('"', quote + 1)) {
    if (quote < 0) return json.length;
    // Escaped when an odd number of backslashes stands before it.
    let backslashes = 0;
    while (json.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes += 1;
    if (backslashes % 2 === 0) return quote;
  }
};

/** The index just after the value that starts at `start` (a string, an object, an array or a literal). */
const valueEnd = (json: string, start: number): number => {
  const first = json.charCodeAt(start);
  if (first === QUOTE) return stringEnd(json, start) + 1;
  if (!OPEN.has(first)) {
    let end = start;
    while (end < json.length && json.charCodeAt(end) !== COMMA && json.charCodeAt(end) !== 0x7d) end += 1;
    return end;
  }
  let depth = 0;
  for (let i = start; i < json.length; i += 1) {
    const c = json.charCodeAt(i);
    if (c === QUOTE) i = stringEnd(json, i);
    else if (OPEN.has(c)) depth += 1;
    else if (CLOSE.has(c) && --depth === 0) return i + 1;
  }
  return json.length;
};

const named = (json: string, start: number, end: number, key: string): boolean => {
  if (end - start !== key.length) return false;
  for (let k = 0; k < key.length; k += 1) if (json.charCodeAt(start + k) !== key.charCodeAt(k)) return false;
  return true;
};

/**
 * The value of the top-level field `key` (an ASCII name JSON writes without escapes) when it is a
 * string without escapes; null in every other case (absent, another type, escaped text), where the
 * caller parses the text to know.
 */
export const plainStringField = (json: string, key: string): string | null => {
  if (json.charCodeAt(0) !== 0x7b) return null;
  for (let i = 1; json.charCodeAt(i) === QUOTE; ) {
    const nameEnd = stringEnd(json, i);
    const value = nameEnd + 2;
    if (named(json, i + 1, nameEnd, key)) {
      if (json.charCodeAt(value) !== QUOTE) return null;
      const end = stringEnd(json, value);
      const text = json.slice(value + 1, end);
      return text.includes('\\') ? null : text;
    }
    i = valueEnd(json, value);
    if (json.charCodeAt(i) !== COMMA) return null;
    i += 1;
  }
  return null;
};
