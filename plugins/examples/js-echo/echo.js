// A decoy transformer in JavaScript: answers with a JSON description of the request
// (as httpbin's /anything does), plus the mapping's `extra` parameters.
//
//   {"method": "POST", "path": "/anything/x", "query": {"a": "1"},
//    "headers": {"content-type": "text/plain"}, "body": "hello", "extra": {...}}

import { log } from 'decoy:plugin/log@0.1.0';

const text = new TextDecoder();
const bytes = new TextEncoder();

function toObject(fields) {
  const out = {};
  for (const [k, v] of fields) {
    if (!(k in out)) out[k] = v;
  }
  return out;
}

export const transformer = {
  transform(context, request, response) {
    if (request.tag !== 'http' || response.tag !== 'http') {
      // Thrown values become the plugin-error result.
      throw { message: 'js-echo only answers HTTP requests' };
    }
    const req = request.val;
    const params = JSON.parse(context.parameters || '{}');
    const described = {
      method: req.method,
      path: req.path,
      query: toObject(req.query),
      headers: toObject(req.headers),
      body: text.decode(req.body),
      mapping: context.mappingName ?? context.mappingId,
      extra: params.extra ?? null,
    };
    log('debug', 'echoing a request', [['path', req.path]]);
    const headers = response.val.headers.filter(([k]) => k.toLowerCase() !== 'content-type');
    headers.push(['content-type', 'application/json']);
    return {
      tag: 'http',
      val: {
        status: response.val.status,
        headers,
        body: bytes.encode(JSON.stringify(described)),
        delayMs: response.val.delayMs,
      },
    };
  },
};
