// Package masters is where a redlock-bench driver's votes live: it starts
// local masters (redis-server) or local Redis Clusters, probes the
// masters it is given (saying in the flags' terms why one cannot be used:
// a password, TLS on one side only, a server that is not Redis), and
// removes a run's keys from them when it ends.
package masters
