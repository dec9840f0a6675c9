/*
 * ui.c: the console's files at /ui/ (src/api/ui/, compiled into the binary
 * by cmake/embed.cmake as api_ui_assets[]): index.html at /ui/, the others
 * at /ui/NAME, / and /ui sent on to /ui/.
 *
 * No authentication on these routes, by design: the files are the same for
 * everyone and hold no cluster data. The page reads everything it shows
 * from the /v1 routes and /metrics with the token it is given (the URL's
 * fragment, #token=..., which browsers never send to the server; kept in
 * the tab's sessionStorage), so a user token sees what that user may see
 * in the CLI, and no more. A browser cannot send a bearer header when it
 * navigates, so guarding the files would only add a login page in front of
 * the same login.
 *
 * Replies carry an ETag (FNV-1a of the file) and Cache-Control: no-cache,
 * so a browser revalidates (304) and a new build is seen at once; and a
 * Content-Security-Policy that allows scripts and styles from this origin
 * only (the page has no inline script or style) and connections to any
 * http(s) origin (a task's log is read from its node's agent).
 */
#include <stdio.h>
#include <string.h>

#include "api/api_int.h"

static const struct {
    const char *ext, *type;
} ui_types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".svg", "image/svg+xml"},
    {NULL, NULL},
};

static const char *ui_type(const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; ui_types[i].ext; i++) {
        size_t k = strlen(ui_types[i].ext);
        if (n > k && strcmp(name + n - k, ui_types[i].ext) == 0)
            return ui_types[i].type;
    }
    return "application/octet-stream";
}

static int serve(api_req_t *r, const char *name)
{
    const api_asset_t *a = NULL;
    uint64_t h = 1469598103934665603ULL;

    for (int i = 0; api_ui_assets[i].name; i++)
        if (strcmp(api_ui_assets[i].name, name) == 0)
            a = &api_ui_assets[i];
    if (!a)
        return api_error(r, 404, "/ui/%s: no such file in the console", name);
    for (size_t i = 0; i < a->len; i++)
        h = (h ^ a->data[i]) * 1099511628211ULL;
    snprintf(r->etag, sizeof r->etag, "\"%016llx\"", (unsigned long long)h);
    r->asset = true;
    r->ctype = ui_type(a->name);
    const char *inm = api_header(r, "If-None-Match");
    if (inm && strcmp(inm, r->etag) == 0) {
        r->text = (char *)"";
        r->textlen = 0;
        r->status = 304;
        return 304;
    }
    r->text = (char *)a->data;
    r->textlen = a->len;
    r->status = 200;
    return 200;
}

int api_ui_index(api_req_t *r)
{
    return serve(r, "index.html");
}

int api_ui_file(api_req_t *r)
{
    return serve(r, r->params[0]);
}

int api_ui_redirect(api_req_t *r)
{
    r->location = "/ui/";
    return api_error(r, 302, "the console is at /ui/");
}
