/*
 * llmemu.c: arb_llmemu, an emulated LLM replica for the balancer's tests
 * and `arbiter bench infer` (there is no GPU here). An OpenAI-compatible
 * HTTP/1.1 server (POST /v1/completions and /v1/chat/completions, streamed
 * as server-sent events token by token or answered whole; GET /metrics in
 * vLLM's names, or SGLang's or llama.cpp's; /health; /v1/models) in front of
 * a model of a continuous-batching engine that runs in real time:
 *
 *   tokens     a prompt's tokens are its rendered bytes / 4 (completions:
 *              the prompt; chat: "<|role|>\n" + content + "\n" per message)
 *   KV cache   --kv-blocks blocks of --block-tokens tokens; a block holding a
 *              full prompt block is registered under its chain hash once
 *              computed (chunk by chunk), and stays cached (LRU, evictable) when its request
 *              ends; a new request reuses its longest cached prefix (vLLM's
 *              automatic prefix caching), always computing at least one
 *              token; a request reserves blocks for prompt and output at
 *              admission, and waits when they are not there
 *   batch      at most --batch requests run; the rest wait, first come first
 *              served (a request whose LoRA adapter cannot be loaded yet is
 *              passed over)
 *   a step     every running request in decode makes one token; prefill is
 *              chunked into what is left of a --step-tokens budget; a step
 *              lasts decode_base + ctx_cost x (context tokens of the decoding
 *              requests) + prefill_cost x (prompt tokens prefilled)
 *              (+ --lora-load-ms for each adapter loaded), all divided by
 *              --speedup
 *   LoRA       a request for a model other than --model names an adapter;
 *              --max-lora adapters fit at once, an idle one is unloaded for
 *              a new one
 *
 * The defaults are a 7B dense model in bf16 on one 24 GB GPU (an A10G, as in
 * llm-d's EKS prefix-routing benchmark: Qwen2.5-7B-Instruct on 8 g5.xlarge):
 * a decode step reads the 15 GB of weights at ~600 GB/s (25 ms), plus 57 KiB
 * of KV per context token (28 layers x 4 KV heads x 128 x 2 x 2 B: 0.095 us
 * per token); prefill runs at ~60 TFLOP/s effective against 14 GFLOP per
 * token (0.23 ms per token, 4,300 tokens/s); (24 GB x 0.9 - 15 GB) / 57 KiB
 * = 115k tokens of KV cache, 7,200 blocks of 16. docs/lb.md states this.
 *
 * It knows nothing of who routes it: no policy, no balancer header.
 *
 *   arb_llmemu (--port-file F | --port P) [--id NAME] [--model NAME]
 *       [--kv-blocks 7200] [--block-tokens 16] [--batch 64] [--step-tokens 2048]
 *       [--prefill-us 230] [--decode-ms 25] [--ctx-ns 95] [--max-lora 4]
 *       [--lora-load-ms 40] [--speedup 1] [--max-tokens 16]
 *       [--metrics vllm|sglang|llamacpp]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "lb/http.h"
#include "lb/lb.h"

#define BPT 4 /* bytes per token */
#define NIL (-1)

/* ---- configuration --------------------------------------------------------- */

static struct {
    const char *id, *model, *metrics;
    int kv_blocks, block_tokens, batch, step_tokens, max_lora, max_tokens;
    double prefill_us, decode_ms, ctx_ns, lora_load_ms, speedup;
} cf = {"emu", "emu-7b", "vllm", 7200, 16, 64, 2048, 4, 16, 230, 25, 95, 40, 1};

static const char *opt(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return def;
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- connections ----------------------------------------------------------- */

typedef struct req req_t;
typedef struct conn {
    int fd;
    char *in;
    size_t in_len, in_cap;
    char *out;
    size_t out_len, out_sent, out_cap;
    bool want_out, closing;
    req_t *busy; /* the request being answered; reading waits */
    bool keep;
    struct conn *next_dead;
} conn_t;

static int ep;

static void out_add(conn_t *c, const char *s, size_t n)
{
    if (c->out_len + n > c->out_cap) {
        size_t cap = (c->out_cap ? c->out_cap * 2 : 4096);
        while (cap < c->out_len + n)
            cap *= 2;
        char *o = realloc(c->out, cap);
        if (!o) {
            c->closing = true;
            return;
        }
        c->out = o;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, s, n);
    c->out_len += n;
}

static void out_fmt(conn_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_fmt(conn_t *c, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        out_add(c, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* ---- the engine ------------------------------------------------------------- */

struct req {
    conn_t *c; /* NULL once the client left */
    long id;
    bool chat, stream;
    char model[128];
    int lora; /* adapter slot, -1 = base model */
    int ptok, nfull, out, gen;
    uint64_t *hash; /* nfull chain hashes */
    int *blk, nblk;
    int cached, done; /* prompt tokens found cached; prompt tokens computed */
    int chunk;        /* prompt tokens in the current step */
    bool running;
    int64_t t0;
    req_t *next;
};

static struct {
    /* KV blocks */
    int *ref, *lprev, *lnext, *bnext, *bucket, nbucket;
    uint64_t *bh;
    bool *reg;
    int *unused, nunused, lru_old, lru_new, nlru;
    /* requests */
    req_t *wait_head, *wait_tail, *run;
    int nwait, nrun;
    long next_id;
    bool stepping;
    int tfd;
    /* adapters */
    char lora_name[32][128];
    int lora_users[32], nlora_loaded, loads_pending;
    /* counters */
    double prompt_tokens, gen_tokens, hit_tokens, query_tokens, done_reqs;
} E;

static void lru_unlink(int b)
{
    if (E.lprev[b] != NIL)
        E.lnext[E.lprev[b]] = E.lnext[b];
    else
        E.lru_old = E.lnext[b];
    if (E.lnext[b] != NIL)
        E.lprev[E.lnext[b]] = E.lprev[b];
    else
        E.lru_new = E.lprev[b];
    E.lprev[b] = E.lnext[b] = NIL;
    E.nlru--;
}

static void lru_push_new(int b)
{
    E.lprev[b] = E.lru_new;
    E.lnext[b] = NIL;
    if (E.lru_new != NIL)
        E.lnext[E.lru_new] = b;
    else
        E.lru_old = b;
    E.lru_new = b;
    E.nlru++;
}

static int lookup(uint64_t h)
{
    for (int b = E.bucket[h % (uint64_t)E.nbucket]; b != NIL; b = E.bnext[b])
        if (E.bh[b] == h)
            return b;
    return NIL;
}

static void reg_del(int b)
{
    int *pp = &E.bucket[E.bh[b] % (uint64_t)E.nbucket];
    while (*pp != NIL && *pp != b)
        pp = &E.bnext[*pp];
    if (*pp == b)
        *pp = E.bnext[b];
    E.reg[b] = false;
}

static void reg_add(int b, uint64_t h)
{
    E.bh[b] = h;
    E.reg[b] = true;
    E.bnext[b] = E.bucket[h % (uint64_t)E.nbucket];
    E.bucket[h % (uint64_t)E.nbucket] = b;
}

static int kv_init(void)
{
    int n = cf.kv_blocks;
    E.nbucket = n * 2 + 1;
    E.ref = calloc((size_t)n, sizeof *E.ref);
    E.lprev = malloc((size_t)n * sizeof *E.lprev);
    E.lnext = malloc((size_t)n * sizeof *E.lnext);
    E.bnext = malloc((size_t)n * sizeof *E.bnext);
    E.bucket = malloc((size_t)E.nbucket * sizeof *E.bucket);
    E.bh = calloc((size_t)n, sizeof *E.bh);
    E.reg = calloc((size_t)n, sizeof *E.reg);
    E.unused = malloc((size_t)n * sizeof *E.unused);
    if (!E.ref || !E.lprev || !E.lnext || !E.bnext || !E.bucket || !E.bh || !E.reg || !E.unused)
        return -1;
    for (int i = 0; i < E.nbucket; i++)
        E.bucket[i] = NIL;
    for (int i = 0; i < n; i++) {
        E.lprev[i] = E.lnext[i] = NIL;
        E.unused[i] = n - 1 - i;
    }
    E.nunused = n;
    E.lru_old = E.lru_new = NIL;
    return 0;
}

static double kv_usage(void)
{
    return (double)(cf.kv_blocks - E.nunused - E.nlru) / cf.kv_blocks;
}

/* ---- LoRA slots -------------------------------------------------------------- */

/* The adapter's slot, loading it when a slot is free or idle; -2: not now. */
static int lora_slot(const char *name)
{
    int idle = -1;
    for (int i = 0; i < E.nlora_loaded; i++) {
        if (strcmp(E.lora_name[i], name) == 0)
            return i;
        if (E.lora_users[i] == 0 && idle < 0)
            idle = i;
    }
    if (E.nlora_loaded < cf.max_lora && E.nlora_loaded < 32) {
        idle = E.nlora_loaded++;
    } else if (idle < 0) {
        return -2;
    }
    snprintf(E.lora_name[idle], sizeof E.lora_name[idle], "%s", name);
    E.lora_users[idle] = 0;
    E.loads_pending++;
    return idle;
}

/* ---- admission, steps, tokens ------------------------------------------------ */

/* Try to start r: prefix hits, blocks for the rest, an adapter slot. */
static bool admit(req_t *r)
{
    int hits = 0, hits_free = 0, need;

    if (strcmp(r->model, cf.model) != 0 && cf.max_lora > 0) {
        r->lora = lora_slot(r->model);
        if (r->lora == -2)
            return false;
    } else {
        r->lora = -1;
    }
    while (hits < r->nfull) {
        int b = lookup(r->hash[hits]);
        if (b == NIL)
            break;
        hits_free += E.ref[b] == 0;
        hits++;
    }
    if (hits * cf.block_tokens >= r->ptok)
        hits = (r->ptok - 1) / cf.block_tokens; /* at least one token is computed */
    need = r->nblk - hits;
    if (need > E.nunused + E.nlru - hits_free)
        return false;
    r->blk = malloc((size_t)r->nblk * sizeof *r->blk);
    if (!r->blk)
        return false;
    for (int i = 0; i < hits; i++) {
        int b = lookup(r->hash[i]);
        if (E.ref[b]++ == 0)
            lru_unlink(b);
        r->blk[i] = b;
    }
    for (int i = hits; i < r->nblk; i++) {
        int b;
        if (E.nunused > 0) {
            b = E.unused[--E.nunused];
        } else {
            b = E.lru_old;
            lru_unlink(b);
            reg_del(b);
        }
        E.ref[b] = 1;
        r->blk[i] = b;
    }
    r->cached = hits * cf.block_tokens;
    r->done = r->cached;
    E.hit_tokens += r->cached;
    E.query_tokens += r->ptok;
    if (r->lora >= 0)
        E.lora_users[r->lora]++;
    return true;
}

static void release(req_t *r)
{
    for (int i = r->nblk - 1; r->blk && i >= 0; i--) {
        int b = r->blk[i];
        if (--E.ref[b] > 0)
            continue;
        if (E.reg[b])
            lru_push_new(b);
        else
            E.unused[E.nunused++] = b;
    }
    free(r->blk);
    r->blk = NULL;
    if (r->lora >= 0)
        E.lora_users[r->lora]--;
}

static void req_free(req_t *r)
{
    free(r->hash);
    free(r->blk);
    free(r);
}

static void conn_flush(conn_t *c);
static void conn_next(conn_t *c);

static void emit(req_t *r, bool last)
{
    conn_t *c = r->c;
    if (!c)
        return;
    if (r->stream) {
        char buf[512];
        int n;
        if (r->chat)
            n = snprintf(buf, sizeof buf,
                         "data: {\"id\":\"chatcmpl-%ld\",\"object\":\"chat.completion.chunk\","
                         "\"model\":\"%s\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
                         "\" tok\"},\"finish_reason\":%s}]}\n\n%s",
                         r->id, r->model, last ? "\"length\"" : "null",
                         last ? "data: [DONE]\n\n" : "");
        else
            n = snprintf(buf, sizeof buf,
                         "data: {\"id\":\"cmpl-%ld\",\"object\":\"text_completion\",\"model\":"
                         "\"%s\",\"choices\":[{\"index\":0,\"text\":\" tok\",\"finish_reason\":"
                         "%s}]}\n\n%s",
                         r->id, r->model, last ? "\"length\"" : "null",
                         last ? "data: [DONE]\n\n" : "");
        out_fmt(c, "%x\r\n", n);
        out_add(c, buf, (size_t)n);
        out_add(c, last ? "\r\n0\r\n\r\n" : "\r\n", last ? 7 : 2);
    } else if (last) {
        char body[1024];
        int n = snprintf(body, sizeof body,
                         "{\"id\":\"%s-%ld\",\"object\":\"%s\",\"model\":\"%s\",\"choices\":[{"
                         "\"index\":0,%s\"finish_reason\":\"length\"}],\"usage\":{"
                         "\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
                         "\"prompt_tokens_details\":{\"cached_tokens\":%d}}}",
                         r->chat ? "chatcmpl" : "cmpl", r->id,
                         r->chat ? "chat.completion" : "text_completion", r->model,
                         r->chat ? "\"message\":{\"role\":\"assistant\",\"content\":\"tok...\"},"
                                 : "\"text\":\"tok...\",",
                         r->ptok, r->out, r->ptok + r->out, r->cached);
        out_fmt(c,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s"
                "\r\n",
                n, c->keep ? "" : "Connection: close\r\n");
        out_add(c, body, (size_t)n);
    }
    conn_flush(c);
}

static void finish(req_t *r)
{
    conn_t *c = r->c;
    release(r);
    E.done_reqs++;
    if (c) {
        c->busy = NULL;
        r->c = NULL;
        if (c->closing)
            conn_flush(c); /* closes once written */
        else
            conn_next(c);
    }
    req_free(r);
}

static void arm(double us)
{
    struct itimerspec its = {0};
    int64_t ns = (int64_t)(us * 1000 / cf.speedup);
    if (ns < 1000)
        ns = 1000;
    its.it_value.tv_sec = ns / 1000000000;
    its.it_value.tv_nsec = ns % 1000000000;
    timerfd_settime(E.tfd, 0, &its, NULL);
    E.stepping = true;
}

/* Plan the next step: admit, give out the token budget, arm the timer. */
static void schedule(void)
{
    double us;
    int budget = cf.step_tokens;
    double ctx = 0, pre = 0;
    req_t **pp, *r;

    /* admit in arrival order; a request that does not fit blocks the ones
     * behind it (vLLM's FCFS), except for LoRA slots */
    for (pp = &E.wait_head; *pp && E.nrun < cf.batch;) {
        r = *pp;
        if (!admit(r)) {
            if (r->lora == -2) {
                pp = &r->next;
                continue;
            }
            break;
        }
        *pp = r->next;
        if (E.wait_tail == r) {
            E.wait_tail = NULL;
            for (req_t *x = E.wait_head; x; x = x->next)
                E.wait_tail = x;
        }
        E.nwait--;
        r->running = true;
        r->next = NULL;
        req_t **tail = &E.run; /* in admission order: the oldest prefill goes first */
        while (*tail)
            tail = &(*tail)->next;
        *tail = r;
        E.nrun++;
    }
    if (E.nrun == 0) {
        E.stepping = false;
        return;
    }
    for (r = E.run; r; r = r->next) {
        r->chunk = 0;
        if (r->done >= r->ptok) {
            budget--;
            ctx += r->ptok + r->gen;
        }
    }
    for (r = E.run; r && budget > 0; r = r->next)
        if (r->done < r->ptok) {
            r->chunk = r->ptok - r->done < budget ? r->ptok - r->done : budget;
            budget -= r->chunk;
            pre += r->chunk;
        }
    us = cf.decode_ms * 1000 + cf.ctx_ns / 1000 * ctx + cf.prefill_us * pre +
         cf.lora_load_ms * 1000 * E.loads_pending;
    E.loads_pending = 0;
    arm(us);
}

/* The step is over: tokens out, prefills advanced, finished requests gone. */
static void step_done(void)
{
    req_t **pp = &E.run;

    while (*pp) {
        req_t *r = *pp;
        bool tok = false;
        if (r->done >= r->ptok) {
            tok = true;
        } else if (r->chunk > 0) {
            r->done += r->chunk;
            E.prompt_tokens += r->chunk;
            /* the full blocks computed so far are in the cache now (vLLM caches a
             * block once it is full and computed, chunk by chunk) */
            for (int i = 0; i < r->nfull && i < r->nblk && (i + 1) * cf.block_tokens <= r->done;
                 i++)
                if (!E.reg[r->blk[i]] && lookup(r->hash[i]) == NIL)
                    reg_add(r->blk[i], r->hash[i]);
            tok = r->done >= r->ptok;
        }
        if (tok && r->c) {
            r->gen++;
            E.gen_tokens++;
            emit(r, r->gen >= r->out);
        }
        if (!r->c || r->gen >= r->out) {
            *pp = r->next;
            E.nrun--;
            finish(r);
            continue;
        }
        pp = &r->next;
    }
    schedule();
}

/* ---- requests from the wire --------------------------------------------------- */

typedef struct render {
    char *d;
    size_t n, cap;
} render_t;

static void rput(render_t *x, const char *s, size_t n)
{
    if (x->n + n > x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 4096;
        while (cap < x->n + n)
            cap *= 2;
        char *d = realloc(x->d, cap);
        if (!d)
            return;
        x->d = d;
        x->cap = cap;
    }
    memcpy(x->d + x->n, s, n);
    x->n += n;
}

static void rput_content(render_t *x, const json_t *c)
{
    size_t i;
    json_t *p;
    if (json_is_string(c)) {
        rput(x, json_string_value(c), json_string_length(c));
        return;
    }
    json_array_foreach(c, i, p)
    {
        json_t *t = json_object_get(p, "text");
        if (json_is_string(t))
            rput(x, json_string_value(t), json_string_length(t));
    }
}

static void reply(conn_t *c, int code, const char *reason, const char *ctype, const char *body)
{
    out_fmt(c, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", code, reason,
            ctype, strlen(body), c->keep ? "" : "Connection: close\r\n");
    out_add(c, body, strlen(body));
    conn_flush(c);
}

static void metrics(conn_t *c)
{
    char body[4096];
    const char *m = cf.model;
    int n;

    if (strcmp(cf.metrics, "sglang") == 0) {
        n = snprintf(body, sizeof body,
                     "# TYPE sglang:num_running_reqs gauge\n"
                     "sglang:num_running_reqs{model_name=\"%s\"} %d\n"
                     "# TYPE sglang:num_queue_reqs gauge\n"
                     "sglang:num_queue_reqs{model_name=\"%s\"} %d\n"
                     "# TYPE sglang:token_usage gauge\n"
                     "sglang:token_usage{model_name=\"%s\"} %.4f\n",
                     m, E.nrun, m, E.nwait, m, kv_usage());
    } else if (strcmp(cf.metrics, "llamacpp") == 0) {
        n = snprintf(body, sizeof body,
                     "# TYPE llamacpp:requests_processing gauge\n"
                     "llamacpp:requests_processing %d\n"
                     "# TYPE llamacpp:requests_deferred gauge\n"
                     "llamacpp:requests_deferred %d\n"
                     "# TYPE llamacpp:kv_cache_usage_ratio gauge\n"
                     "llamacpp:kv_cache_usage_ratio %.4f\n",
                     E.nrun, E.nwait, kv_usage());
    } else {
        char running[1024] = "", waiting[1024] = "";
        for (int i = 0; i < E.nlora_loaded; i++) {
            size_t l = strlen(running);
            snprintf(running + l, sizeof running - l, "%s%s", l ? "," : "", E.lora_name[i]);
        }
        for (req_t *r = E.wait_head; r; r = r->next) {
            size_t l = strlen(waiting);
            if (r->lora == -2 && !strstr(waiting, r->model))
                snprintf(waiting + l, sizeof waiting - l, "%s%s", l ? "," : "", r->model);
        }
        n = snprintf(body, sizeof body,
                     "# HELP vllm:num_requests_running Number of requests in model execution "
                     "batches.\n# TYPE vllm:num_requests_running gauge\n"
                     "vllm:num_requests_running{engine=\"0\",model_name=\"%s\"} %d.0\n"
                     "# HELP vllm:num_requests_waiting Number of requests waiting to be "
                     "processed.\n# TYPE vllm:num_requests_waiting gauge\n"
                     "vllm:num_requests_waiting{engine=\"0\",model_name=\"%s\"} %d.0\n"
                     "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent "
                     "usage.\n# TYPE vllm:kv_cache_usage_perc gauge\n"
                     "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"%s\"} %.4f\n"
                     "# TYPE vllm:lora_requests_info gauge\n"
                     "vllm:lora_requests_info{max_lora=\"%d\",running_lora_adapters=\"%s\","
                     "waiting_lora_adapters=\"%s\"} %ld.0\n"
                     "# TYPE vllm:cache_config_info gauge\n"
                     "vllm:cache_config_info{block_size=\"%d\",num_gpu_blocks=\"%d\"} 1.0\n"
                     "# TYPE vllm:prefix_cache_queries_total counter\n"
                     "vllm:prefix_cache_queries_total{model_name=\"%s\"} %.0f\n"
                     "# TYPE vllm:prefix_cache_hits_total counter\n"
                     "vllm:prefix_cache_hits_total{model_name=\"%s\"} %.0f\n"
                     "# TYPE vllm:prompt_tokens_total counter\n"
                     "vllm:prompt_tokens_total{model_name=\"%s\"} %.0f\n"
                     "# TYPE vllm:generation_tokens_total counter\n"
                     "vllm:generation_tokens_total{model_name=\"%s\"} %.0f\n"
                     "# TYPE vllm:request_success_total counter\n"
                     "vllm:request_success_total{model_name=\"%s\"} %.0f\n",
                     m, E.nrun, m, E.nwait, m, kv_usage(), cf.max_lora, running, waiting,
                     (long)time(NULL), cf.block_tokens, cf.kv_blocks, m, E.query_tokens, m,
                     E.hit_tokens, m, E.prompt_tokens, m, E.gen_tokens, m, E.done_reqs);
    }
    if (n < 0 || (size_t)n >= sizeof body)
        n = 0;
    body[n] = '\0';
    reply(c, 200, "OK", "text/plain; version=0.0.4", body);
}

static void bad(conn_t *c, int code, const char *reason, const char *msg)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\"}}", msg);
    reply(c, code, reason, "application/json", body);
}

/* A completion request: tokens, block hashes, into the queue. */
static void completion(conn_t *c, bool chat, const char *body, size_t n)
{
    json_error_t je;
    json_t *o = json_loadb(body, n, 0, &je), *v;
    render_t x = {0};
    req_t *r = NULL;

    if (!json_is_object(o)) {
        bad(c, 400, "Bad Request", "body is not a JSON object");
        goto out;
    }
    r = calloc(1, sizeof *r);
    if (!r)
        goto out;
    r->chat = chat;
    r->c = c;
    r->id = ++E.next_id;
    r->t0 = now_us();
    r->stream = json_is_true(json_object_get(o, "stream"));
    v = json_object_get(o, "model");
    snprintf(r->model, sizeof r->model, "%s", json_is_string(v) ? json_string_value(v) : cf.model);
    v = json_object_get(o, "max_tokens");
    if (!json_is_integer(v))
        v = json_object_get(o, "max_completion_tokens");
    r->out = json_is_integer(v) && json_integer_value(v) > 0 ? (int)json_integer_value(v)
                                                             : cf.max_tokens;
    if (r->out > 100000)
        r->out = 100000;
    if (chat) {
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(o, "messages"), i, m)
        {
            json_t *role = json_object_get(m, "role");
            rput(&x, "<|", 2);
            if (json_is_string(role))
                rput(&x, json_string_value(role), json_string_length(role));
            rput(&x, "|>\n", 3);
            rput_content(&x, json_object_get(m, "content"));
            rput(&x, "\n", 1);
        }
        rput(&x, "<|assistant|>\n", 14);
    } else {
        v = json_object_get(o, "prompt");
        if (json_is_array(v))
            v = json_array_get(v, 0);
        if (json_is_string(v))
            rput(&x, json_string_value(v), json_string_length(v));
    }
    r->ptok = (int)((x.n + BPT - 1) / BPT);
    if (r->ptok < 1)
        r->ptok = 1;
    r->nfull = (int)(x.n / ((size_t)BPT * (size_t)cf.block_tokens));
    r->nblk = (r->ptok + r->out + cf.block_tokens - 1) / cf.block_tokens;
    if (r->nblk > cf.kv_blocks) {
        bad(c, 400, "Bad Request", "prompt and max_tokens do not fit in the KV cache");
        req_free(r);
        r = NULL;
        goto out;
    }
    r->hash = calloc((size_t)(r->nfull ? r->nfull : 1), sizeof *r->hash);
    uint64_t h = lb_hash64(r->model, strlen(r->model), 0x656d75ULL);
    size_t bb = (size_t)cf.block_tokens * BPT;
    for (int i = 0; r->hash && i < r->nfull; i++) {
        h = lb_hash64(x.d + (size_t)i * bb, bb, h);
        r->hash[i] = h;
    }
    if (!r->hash) {
        req_free(r);
        r = NULL;
        goto out;
    }
    c->busy = r;
    if (r->stream) {
        out_fmt(c,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                "Transfer-Encoding: chunked\r\n%s\r\n",
                c->keep ? "" : "Connection: close\r\n");
        conn_flush(c);
    }
    if (E.wait_tail)
        E.wait_tail->next = r;
    else
        E.wait_head = r;
    E.wait_tail = r;
    E.nwait++;
    if (!E.stepping)
        schedule();
out:
    free(x.d);
    json_decref(o);
}

/* ---- the server loop ----------------------------------------------------------- */

static conn_t *dead;

static void conn_close(conn_t *c)
{
    if (c->fd < 0)
        return;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    if (c->busy) {
        req_t *r = c->busy;
        r->c = NULL;
        if (!r->running) { /* still waiting: take it out now */
            req_t **pp = &E.wait_head, *last = NULL;
            while (*pp && *pp != r) {
                last = *pp;
                pp = &(*pp)->next;
            }
            if (*pp) {
                *pp = r->next;
                if (E.wait_tail == r)
                    E.wait_tail = last;
                E.nwait--;
                req_free(r);
            }
        }
        c->busy = NULL;
    }
    c->next_dead = dead;
    dead = c;
}

static void conn_flush(conn_t *c)
{
    while (c->fd >= 0 && c->out_sent < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_sent += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!c->want_out) {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                c->want_out = true;
            }
            return;
        }
        conn_close(c);
        return;
    }
    if (c->fd < 0)
        return;
    c->out_len = c->out_sent = 0;
    if (c->want_out) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->want_out = false;
    }
    if (!c->busy && c->closing)
        conn_close(c);
}

/* Serve what is in the input buffer, one request at a time. */
static void conn_next(conn_t *c)
{
    while (c->fd >= 0 && !c->busy && !c->closing) {
        http_head_t h;
        int rc = http_parse_request(c->in, c->in_len, NULL, &h);
        if (rc == 0)
            return;
        if (rc < 0 || h.chunked) {
            c->keep = false;
            c->closing = true;
            bad(c, rc < 0 ? 400 : 411, rc < 0 ? "Bad Request" : "Length Required",
                rc < 0 ? "malformed request" : "send Content-Length");
            return;
        }
        size_t blen = h.clen > 0 ? (size_t)h.clen : 0, total = h.len + blen;
        if (total > c->in_len) {
            if (total > c->in_cap) {
                char *in = total <= (64u << 20) ? realloc(c->in, total) : NULL;
                if (!in) {
                    conn_close(c);
                    return;
                }
                c->in = in;
                c->in_cap = total;
            }
            return; /* the body is still coming */
        }
        char path[256];
        snprintf(path, sizeof path, "%.*s", (int)(h.tlen < 255 ? h.tlen : 255), h.target);
        char *q = strchr(path, '?');
        if (q)
            *q = '\0';
        c->keep = http_keepalive(&h);
        if (h.method == HTTP_POST && strcmp(path, "/v1/completions") == 0)
            completion(c, false, c->in + h.len, blen);
        else if (h.method == HTTP_POST && strcmp(path, "/v1/chat/completions") == 0)
            completion(c, true, c->in + h.len, blen);
        else if (strcmp(path, "/metrics") == 0)
            metrics(c);
        else if (strcmp(path, "/health") == 0 || strcmp(path, "/healthz") == 0)
            reply(c, 200, "OK", "text/plain", "ok\n");
        else if (strcmp(path, "/v1/models") == 0) {
            char b[512];
            snprintf(b, sizeof b,
                     "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\","
                     "\"owned_by\":\"%s\"}]}",
                     cf.model, cf.id);
            reply(c, 200, "OK", "application/json", b);
        } else
            bad(c, 404, "Not Found", "no such endpoint");
        if (c->fd < 0)
            return;
        memmove(c->in, c->in + total, c->in_len - total);
        c->in_len -= total;
        if (!c->keep && !c->busy) {
            c->closing = true;
            conn_flush(c);
            return;
        }
        if (!c->keep)
            c->closing = true;
    }
}

static void conn_read(conn_t *c)
{
    for (;;) {
        if (c->in_len == c->in_cap) {
            size_t cap = c->in_cap * 2;
            char *in = cap <= (64u << 20) ? realloc(c->in, cap) : NULL;
            if (!in) {
                conn_close(c);
                return;
            }
            c->in = in;
            c->in_cap = cap;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (n > 0) {
            c->in_len += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        conn_close(c); /* EOF or error: the client left */
        return;
    }
    conn_next(c);
}

static int listen_on(int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)*port)};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 1024) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

int main(int argc, char **argv)
{
    const char *pf = opt(argc, argv, "--port-file", NULL);
    int port = atoi(opt(argc, argv, "--port", "0")), lfd;
    static int k_listen, k_timer;
    struct epoll_event evs[128];

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        puts("usage: arb_llmemu (--port-file F | --port P) [--id NAME] [--model NAME] "
             "[--kv-blocks N] [--block-tokens N] [--batch N] [--step-tokens N] [--prefill-us US] "
             "[--decode-ms MS] [--ctx-ns NS] [--max-lora N] [--lora-load-ms MS] [--speedup X] "
             "[--max-tokens N] [--metrics vllm|sglang|llamacpp]");
        return 0;
    }
    cf.id = opt(argc, argv, "--id", cf.id);
    cf.model = opt(argc, argv, "--model", cf.model);
    cf.metrics = opt(argc, argv, "--metrics", cf.metrics);
    cf.kv_blocks = atoi(opt(argc, argv, "--kv-blocks", "7200"));
    cf.block_tokens = atoi(opt(argc, argv, "--block-tokens", "16"));
    cf.batch = atoi(opt(argc, argv, "--batch", "64"));
    cf.step_tokens = atoi(opt(argc, argv, "--step-tokens", "2048"));
    cf.max_lora = atoi(opt(argc, argv, "--max-lora", "4"));
    cf.max_tokens = atoi(opt(argc, argv, "--max-tokens", "16"));
    cf.prefill_us = atof(opt(argc, argv, "--prefill-us", "230"));
    cf.decode_ms = atof(opt(argc, argv, "--decode-ms", "25"));
    cf.ctx_ns = atof(opt(argc, argv, "--ctx-ns", "95"));
    cf.lora_load_ms = atof(opt(argc, argv, "--lora-load-ms", "40"));
    cf.speedup = atof(opt(argc, argv, "--speedup", "1"));
    if (cf.kv_blocks < 16 || cf.block_tokens < 1 || cf.batch < 1 || cf.step_tokens < 1 ||
        cf.max_tokens < 1 || cf.max_lora < 0 || cf.max_lora > 32 || cf.speedup <= 0 ||
        cf.prefill_us < 0 || cf.decode_ms < 0 || cf.ctx_ns < 0) {
        fprintf(stderr, "arb_llmemu: a value out of range; see --help\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (kv_init() < 0)
        return 1;
    lfd = listen_on(&port);
    ep = epoll_create1(0);
    E.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    if (lfd < 0 || ep < 0 || E.tfd < 0) {
        perror("arb_llmemu: listen");
        return 1;
    }
    struct epoll_event e1 = {.events = EPOLLIN, .data.ptr = &k_listen};
    struct epoll_event e2 = {.events = EPOLLIN, .data.ptr = &k_timer};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e1);
    epoll_ctl(ep, EPOLL_CTL_ADD, E.tfd, &e2);
    if (pf) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s.tmp", pf);
        FILE *f = fopen(tmp, "w");
        if (!f)
            return 1;
        fprintf(f, "%d\n", port);
        fclose(f);
        rename(tmp, pf);
    }
    for (;;) {
        int n = epoll_wait(ep, evs, 128, -1);
        for (int i = 0; i < n; i++) {
            void *k = evs[i].data.ptr;
            if (k == &k_listen) {
                for (;;) {
                    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK), one = 1;
                    if (fd < 0)
                        break;
                    conn_t *c = calloc(1, sizeof *c);
                    if (c)
                        c->in = malloc(16384);
                    if (!c || !c->in) {
                        free(c);
                        close(fd);
                        continue;
                    }
                    c->fd = fd;
                    c->in_cap = 16384;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
                }
            } else if (k == &k_timer) {
                uint64_t x;
                if (read(E.tfd, &x, sizeof x) == (ssize_t)sizeof x)
                    step_done();
            } else {
                conn_t *c = k;
                if (c->fd < 0)
                    continue;
                if (evs[i].events & EPOLLOUT)
                    conn_flush(c);
                if (c->fd >= 0 && (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
                    conn_read(c);
            }
        }
        while (dead) {
            conn_t *c = dead;
            dead = c->next_dead;
            free(c->in);
            free(c->out);
            free(c);
        }
    }
}
