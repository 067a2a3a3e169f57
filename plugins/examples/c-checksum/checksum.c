// A decoy transformer in C: adds `x-body-length` and `x-body-crc32` headers that
// describe the request body, and keeps the mapping's response otherwise. With
// `"transformerParameters": {"echo": true}` it also answers with the request body.
//
// The bindings (transformer_plugin.h/.c) are generated from wit/plugin.wit by
// `wit-bindgen c`; see build.sh.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transformer_plugin.h"

static uint32_t crc32(const uint8_t *p, size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// Appends a header (copies of name and value) to a header list.
static void add_header(decoy_plugin_types_list_field_t *list, const char *name, const char *value) {
  decoy_plugin_types_field_t *grown =
      realloc(list->ptr, (list->len + 1) * sizeof(decoy_plugin_types_field_t));
  if (!grown) abort();
  list->ptr = grown;
  transformer_plugin_string_dup(&list->ptr[list->len].f0, name);
  transformer_plugin_string_dup(&list->ptr[list->len].f1, value);
  list->len++;
}

bool exports_decoy_plugin_transformer_transform(
    exports_decoy_plugin_transformer_call_context_t *context,
    exports_decoy_plugin_transformer_request_t *request,
    exports_decoy_plugin_transformer_response_t *response,
    exports_decoy_plugin_transformer_response_t *ret,
    exports_decoy_plugin_transformer_plugin_error_t *err) {
  if (request->tag != DECOY_PLUGIN_TYPES_REQUEST_HTTP ||
      response->tag != DECOY_PLUGIN_TYPES_RESPONSE_HTTP) {
    transformer_plugin_string_dup(&err->message, "c-checksum only handles HTTP requests");
    decoy_plugin_types_call_context_free(context);
    decoy_plugin_types_request_free(request);
    decoy_plugin_types_response_free(response);
    return false;
  }
  transformer_plugin_list_u8_t *body = &request->val.http.body;
  char len[32], crc[16];
  snprintf(len, sizeof len, "%zu", body->len);
  snprintf(crc, sizeof crc, "%08x", crc32(body->ptr, body->len));

  // The answer is the mapping's response, moved, with two headers more.
  *ret = *response;
  add_header(&ret->val.http.headers, "x-body-length", len);
  add_header(&ret->val.http.headers, "x-body-crc32", crc);

  // {"echo": true} in the parameters: answer with the request body (moved too).
  const char *params = (const char *)context->parameters.ptr;
  size_t plen = context->parameters.len;
  const char *needle = "\"echo\":true";
  int echo = 0;
  for (size_t i = 0; i + strlen(needle) <= plen; i++) {
    if (memcmp(params + i, needle, strlen(needle)) == 0) echo = 1;
  }
  if (echo) {
    transformer_plugin_list_u8_free(&ret->val.http.body);
    ret->val.http.body = *body;
    body->ptr = NULL;
    body->len = 0;
  }

  decoy_plugin_types_call_context_free(context);
  decoy_plugin_types_request_free(request);
  return true;
}
