/*
 * oai.h: what `arbiter lb` reads from an OpenAI API request, to route it:
 * which endpoint (POST /v1/completions, /v1/chat/completions), and from the
 * JSON body (jansson) the model, `stream`, and the prompt, turned into a
 * chain of block hashes for the prefix policies (lb.h: lb_req_t.blocks).
 *
 * The prompt as the balancer sees it: a completion's `prompt` (a string, the
 * first of an array of strings, or token ids, 4 bytes each), or a chat's
 * `messages` rendered as "role\n" + content + "\n\n" per message (content a
 * string or an array of parts, whose `text`, or `image_url.url`, is taken).
 * It is cut into blocks of `block_bytes` (64 bytes: about 16 tokens of
 * English, vLLM's block) and block i's hash is chained on block i-1's, so
 * blocks[i] names the whole prefix up to block i; the chain's seed is the
 * model, as a cache holds one model's keys. A partial last block is not a
 * block (a cache would not reuse it either). At most `cap` blocks are made:
 * affinity past a few tens of KiB of prompt gains nothing.
 *
 * Return convention: arbiter.h; oai_parse fills err with text that names
 * what is wrong (the body is not JSON, not an object).
 */
#ifndef ARB_LB_OAI_H
#define ARB_LB_OAI_H

#include "arbiter/arbiter.h"

typedef enum oai_kind { OAI_NONE = 0, OAI_COMPLETIONS, OAI_CHAT } oai_kind_t;

typedef struct oai_req {
    oai_kind_t kind;
    char model[128]; /* "" when absent (or longer than this: then cut) */
    bool stream;
    size_t prompt_bytes; /* rendered prompt bytes seen (all of them, hashed or not) */
    int nblocks;         /* blocks[0..nblocks) filled */
    int max_tokens;      /* max_tokens / max_completion_tokens; 0 when absent */
} oai_req_t;

/* Which OpenAI endpoint a request target is (the query is ignored); only
 * these two carry prompts. */
oai_kind_t oai_route(const char *target, size_t tlen);

/* Parse a request body of n bytes for endpoint kind. blocks: room for cap
 * hashes. -EINVAL (with err) when the body is not a JSON object; a body
 * without a prompt, or with fields of unexpected types, parses with
 * nblocks 0 (the backend will answer it as it sees fit). */
int oai_parse(const char *body, size_t n, oai_kind_t kind, size_t block_bytes, uint64_t *blocks,
              int cap, oai_req_t *out, arb_err_t *err);

#endif
