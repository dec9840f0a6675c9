/*
 * channel.h: the assignments channel beside the reports (issue 20). One
 * thread per agent holds a long poll open on the controller,
 *
 *   GET URL/v1/nodes/NAME/assignments?wait=S&version=V&epoch=E
 *
 * which the controller answers as soon as the node's assignment list
 * differs from version V (the list the agent has: a job placed there, a
 * stop, a resize), so that a freed GPU's next task reaches the agent within
 * milliseconds, not at its next report. What comes back is parsed as a
 * report's reply (agent_reply_parse) and left in a mailbox, and the
 * channel's descriptor becomes readable; the agent's loop takes it
 * (agent_push) and applies it under exactly the rules of a report's reply:
 * only while its lease is active, only a list of its lease's epoch, only
 * one newer (epoch, Lamport time) than the last list applied, and each
 * assignment's epoch and attempt checked as always (agent.c).
 *
 *   idle --agent_chan_set(active, epoch)--> polling --reply--> mailbox, fd readable
 *    ^                                        |  ^                |
 *    +-- agent_chan_set(!active): fence, -----+  +---- next poll --+
 *        lost, not registered; or a 409
 *        (another epoch, node lost: the agent reports first)
 *
 * The channel never renews the lease and sends nothing but its node's name,
 * its token or certificate (the controller lets an agent read only its own
 * node: API_SELF) and the epoch: reports remain the only way the agent
 * speaks for its node. A failed or refused poll is tried again after a
 * pause (1 s; at once after a registration under a new epoch): the reports
 * carry the lists all the same, a heartbeat later, and a controller that
 * keeps refusing (a deposed one still answering) costs a poll a second.
 */
#ifndef ARB_AGENT_CHANNEL_H
#define ARB_AGENT_CHANNEL_H

#include "agent/transport.h"

typedef struct agent_chan agent_chan_t;

/* A channel to c->target for node c->node, each poll waiting up to
 * wait_ns (1..60 s). Strings are copied. */
int agent_chan_open(agent_chan_t **out, const agent_transport_conf_t *c, int64_t wait_ns,
                    arb_err_t *err);
/* What the agent has now: polls run only while active, with its lease's
 * epoch and the version of the list it last applied (0: none). */
void agent_chan_set(agent_chan_t *ch, bool active, uint64_t epoch, uint64_t version);
/* Readable when the mailbox has a list (or a refusal) for the agent. */
int agent_chan_fd(const agent_chan_t *ch);
/* The newest list the channel got, moved into *out (free with
 * agent_reply_free): 1; 0 none; -ESTALE the controller refused the poll
 * (another epoch, the node lost): the agent should report now. */
int agent_chan_take(agent_chan_t *ch, agent_reply_t *out);
/* Polls answered with a list, and polls that failed, so far. */
void agent_chan_counts(agent_chan_t *ch, uint64_t *lists, uint64_t *failures);
void agent_chan_close(agent_chan_t *ch);

#endif
