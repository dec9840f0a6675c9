/*
 * arbiter.h: conventions shared by every Arbiter module.
 *
 * Return convention (written once, kept everywhere): a function that can fail
 * returns int, 0 on success and a negative errno value on failure (-EINVAL for
 * bad input, -ENOMEM, -ENOENT, -ERANGE, -ENOSPC when a capacity is exhausted,
 * -EPERM for an illegal state transition). When it takes an arb_err_t *, it
 * also writes one line of text there that a user can act on: what was wrong,
 * where, and how to fix it. A NULL arb_err_t * is allowed and means "no text".
 * On failure nothing the caller owns has been changed.
 *
 * Ownership: a function that allocates says so in its header comment, and
 * says which function frees the result. Pointers passed in are borrowed for
 * the duration of the call unless the comment says the callee keeps them.
 */
#ifndef ARBITER_ARBITER_H
#define ARBITER_ARBITER_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define ARB_VERSION "0.1.0"

/* Error text buffer, filled by failing calls. */
typedef struct arb_err {
    char msg[512];
} arb_err_t;

/* Write a formatted message into e (if not NULL) and return code. */
int arb_errf(arb_err_t *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prefix the message already in e with a formatted context ("file:3:5: "). */
void arb_err_prefix(arb_err_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
