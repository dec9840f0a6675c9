/*
 * service_spec.h: the service keys of a job spec (service_spec.c); the
 * model is in src/state/service.h and docs/services.md.
 */
#ifndef ARB_SPEC_SERVICE_SPEC_H
#define ARB_SPEC_SERVICE_SPEC_H

#include "arbiter/autoscale.h"
#include "spec/sval.h"

typedef struct spec_service {
    bool is;          /* kind: service */
    int replicas;     /* the count asked for (initial, when autoscaled) */
    int port;         /* replica i listens on port + i */
    char health[128]; /* health path, "" none (ready once running) */
    int min;          /* never preempted below this many */
    bool autoscale;
    arb_as_conf_t as; /* min/max mirror min and the max replicas */
    int64_t drain_ns; /* how long a draining replica may take to go idle */
} spec_service_t;

/* Take the service keys (kind, replicas when kind is service, port, health,
 * minReplicas, autoscale) out of a spec's root mapping, validated; c->is
 * says whether it is a service. 0, or -EINVAL/-ENOMEM with x->err naming
 * the field ("FILE:LINE:COL: port: ..."). */
int spec_service_take(sx_t *x, struct fy_node *root, spec_service_t *c);

#endif
