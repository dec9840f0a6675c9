/*
 * oai.c: OpenAI API request bodies as the balancer reads them (oai.h): the
 * endpoint, model, stream, and the prompt as a chain of block hashes.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lb/lb.h"
#include "lb/oai.h"

oai_kind_t oai_route(const char *target, size_t tlen)
{
    const char *q = memchr(target, '?', tlen);
    size_t n = q ? (size_t)(q - target) : tlen;

    if (n == 15 && memcmp(target, "/v1/completions", 15) == 0)
        return OAI_COMPLETIONS;
    if (n == 20 && memcmp(target, "/v1/chat/completions", 20) == 0)
        return OAI_CHAT;
    return OAI_NONE;
}

/* The block hasher: bytes in, a chain of block hashes out. */
typedef struct chain {
    uint64_t *out;
    int cap, n;
    size_t bsz, fill, total;
    uint64_t prev;
    char blk[4096];
} chain_t;

static void feed(chain_t *c, const void *data, size_t len)
{
    const char *s = data;

    c->total += len;
    while (len > 0 && c->n < c->cap) {
        size_t take = c->bsz - c->fill < len ? c->bsz - c->fill : len;
        memcpy(c->blk + c->fill, s, take);
        c->fill += take;
        s += take;
        len -= take;
        if (c->fill == c->bsz) {
            c->prev = lb_hash64(c->blk, c->bsz, c->prev);
            c->out[c->n++] = c->prev;
            c->fill = 0;
        }
    }
}

static void feed_str(chain_t *c, const json_t *s)
{
    feed(c, json_string_value(s), json_string_length(s));
}

/* Token ids: 4 bytes each, little-endian, so a block is block_bytes/4 tokens. */
static void feed_tokens(chain_t *c, const json_t *a)
{
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v)
    {
        uint32_t t = (uint32_t)json_integer_value(v);
        unsigned char b[4] = {(unsigned char)t, (unsigned char)(t >> 8), (unsigned char)(t >> 16),
                              (unsigned char)(t >> 24)};
        feed(c, b, 4);
    }
}

static void feed_prompt(chain_t *c, const json_t *p)
{
    if (json_is_string(p)) {
        feed_str(c, p);
    } else if (json_is_array(p) && json_array_size(p) > 0) {
        const json_t *first = json_array_get(p, 0);
        if (json_is_string(first))
            feed_str(c, first); /* a batch of prompts: the first one routes it */
        else if (json_is_integer(first))
            feed_tokens(c, p);
        else if (json_is_array(first))
            feed_tokens(c, first);
    }
}

static void feed_content(chain_t *c, const json_t *content)
{
    size_t i;
    json_t *part;

    if (json_is_string(content)) {
        feed_str(c, content);
        return;
    }
    json_array_foreach(content, i, part)
    {
        const json_t *t = json_object_get(part, "text");
        const json_t *img = json_object_get(json_object_get(part, "image_url"), "url");
        if (json_is_string(t))
            feed_str(c, t);
        else if (json_is_string(img))
            feed_str(c, img);
    }
}

static void feed_messages(chain_t *c, const json_t *msgs)
{
    size_t i;
    json_t *m;

    json_array_foreach(msgs, i, m)
    {
        const json_t *role = json_object_get(m, "role");
        if (json_is_string(role))
            feed_str(c, role);
        feed(c, "\n", 1);
        feed_content(c, json_object_get(m, "content"));
        feed(c, "\n\n", 2);
    }
}

int oai_parse(const char *body, size_t n, oai_kind_t kind, size_t block_bytes, uint64_t *blocks,
              int cap, oai_req_t *out, arb_err_t *err)
{
    json_error_t je;
    json_t *o = json_loadb(body, n, JSON_REJECT_DUPLICATES, &je), *v;
    chain_t *c = NULL;
    int rc = 0;

    memset(out, 0, sizeof *out);
    out->kind = kind;
    if (!o)
        return arb_errf(err, -EINVAL,
                        "request body: not JSON (line %d, column %d: %s); send the OpenAI "
                        "request as a JSON object",
                        je.line, je.column, je.text);
    if (!json_is_object(o)) {
        rc = arb_errf(err, -EINVAL, "request body: a JSON object is expected ({\"model\": ...})");
        goto out;
    }
    v = json_object_get(o, "model");
    if (json_is_string(v))
        snprintf(out->model, sizeof out->model, "%s", json_string_value(v));
    out->stream = json_is_true(json_object_get(o, "stream"));
    v = json_object_get(o, "max_tokens");
    if (!json_is_integer(v))
        v = json_object_get(o, "max_completion_tokens");
    if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < (1 << 30))
        out->max_tokens = (int)json_integer_value(v);
    if (block_bytes < 1)
        block_bytes = 1;
    c = calloc(1, sizeof *c);
    if (!c) {
        rc = arb_errf(err, -ENOMEM, "out of memory");
        goto out;
    }
    c->out = blocks;
    c->cap = blocks ? cap : 0;
    c->bsz = block_bytes > sizeof c->blk ? sizeof c->blk : block_bytes;
    c->prev = lb_hash64(out->model, strlen(out->model), 0x6f6169ULL);
    if (kind == OAI_CHAT)
        feed_messages(c, json_object_get(o, "messages"));
    else
        feed_prompt(c, json_object_get(o, "prompt"));
    out->nblocks = c->n;
    out->prompt_bytes = c->total;
out:
    free(c);
    json_decref(o);
    return rc;
}
