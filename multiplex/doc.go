// Package multiplex owns the connections to N independent Redis masters and
// one primitive on top of them: send a command to every master at once and
// gather the per-node votes, returning as soon as a quorum said yes or as
// soon as a quorum can no longer say yes.
//
// Each master gets one rueidis client in single-node mode with
// auto-pipelining always on, so that concurrent lockers share each master's
// pipeline and a per-node timeout never tears down a connection: the
// gatherer stops waiting, but the command's reply is still read off the
// pipeline and handed to a LateHandler. The client cache and rueidis's silent
// retries are off. Lock scripts are loaded on every node at connect and
// reloaded on NOSCRIPT. Calls of one script queued for a node at the same
// moment go as one call over many keys when the script has a Multi (see
// Script.Coalesce), and each round gets its own key's reply.
//
// multiplex knows nothing of locks: what a reply means is decided by the
// caller's Classifier. It imports only rueidis and the standard library
// (the redistest sub-package is test and bench tooling, not a dependency).
package multiplex
