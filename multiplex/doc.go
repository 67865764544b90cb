// Package multiplex is a quorum fan-out over N independent Redis masters:
// send one command to every master at once and gather the votes,
// returning as soon as a quorum (N/2+1) said yes, or as soon as a quorum
// can no longer say yes. It knows nothing of locks: a Classifier says what
// each reply means (OK, Refused, Failed), and the caller decides what a
// Tally of votes is worth. Package engine builds the Redlock algorithm on
// it; anything else that needs a majority of independent masters to agree
// can too.
//
// The API is small:
//
//   - Dial connects to the masters (Options; a minority may be down) and
//     checks that they are independent: no two addresses of one server, no
//     replica. Pool.Close ends everything it started.
//   - Pool.Fanout sends a Command (a plain command, or a Script sent by SHA
//     and reloaded on NOSCRIPT) and returns the Tally. Replies that arrive
//     after the decision go to a LateHandler, so that a late yes can be
//     undone. Pool.Post sends without waiting, for clean-up. With
//     Command.Agree, a quorum is one of yes votes that agree on a value
//     (Tally.Agreed), such as the slot each master gave a semaphore's
//     permit.
//   - The restart quarantine (quarantine.Policy): a master whose run_id
//     changed, or (by default) that was younger than MaxTTL when first
//     seen, may have forgotten what it agreed to; its yes votes fail with a
//     *quarantine.Error until MaxTTL has passed.
//   - Pool.Status reports each master's state, identity and counts.
//
// Each master gets one rueidis client in single-node mode with
// auto-pipelining always on, so that concurrent callers share each
// master's pipeline and a per-node timeout never tears down a connection:
// the gatherer stops waiting, but the reply is still read off the pipeline
// and handed to the LateHandler. The client cache and rueidis's silent
// retries are off. Calls of one script queued for a master at the same
// moment go as one call over many keys when the script was made with
// Script.Coalesce (or, for scripts over several keys, Script.CoalesceKeys),
// and each round gets its own call's reply.
//
// multiplex imports only rueidis, the standard library and internal/resp,
// which words a server that is not Redis as redlock-bench does.
package multiplex
