// A test guest in JavaScript for decoy's handling of guest output, failures and
// memory growth. The `mode` parameter says what it does:
// - "print": increments "n" in the kv store, logs a line with console.log, answers "count=<n>";
// - "throw": throws a string (componentize-js traps: it expects {message});
// - "error": throws {message}, which is the plugin-error value;
// - "grow": keeps 64 KiB more per call in a global array, so the instance's memory
//   grows call after call (answers the number of chunks kept);
// - anything else: answers the response unchanged.
import { increment } from 'decoy:plugin/kv@0.1.0';

const hoard = [];
const bytes = new TextEncoder();

function withBody(response, text) {
  return { tag: 'http', val: { ...response.val, body: bytes.encode(text) } };
}

export const transformer = {
  transform(context, request, response) {
    const mode = JSON.parse(context.parameters || '{}').mode ?? '';
    if (mode === 'print') {
      const n = increment('n', 1n);
      console.log(`js guest: call number ${n}`);
      return withBody(response, `count=${n}`);
    }
    if (mode === 'throw') {
      throw 'js-stdio throws a string on purpose';
    }
    if (mode === 'error') {
      // A thrown object with a string `message` is returned as the plugin-error.
      throw { message: 'js-stdio refuses on purpose' };
    }
    if (mode === 'grow') {
      hoard.push(new Uint8Array(64 * 1024).fill(hoard.length & 255));
      return withBody(response, `chunks=${hoard.length}`);
    }
    return response;
  },
};
