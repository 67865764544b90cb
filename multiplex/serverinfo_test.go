package multiplex

import (
	"testing"
	"time"
)

func TestParseServerInfo(t *testing.T) {
	for _, tc := range []struct {
		name, txt string
		want      serverInfo
	}{
		{"redis 6 server section", "# Server\r\nredis_version:6.2.14\r\nrun_id:abc123\r\nuptime_in_seconds:42\r\n",
			serverInfo{Version: "6.2.14", RunID: "abc123", Uptime: 42 * time.Second}},
		{"redis 7 with server time and replication",
			"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nrun_id:f00d\r\nserver_time_usec:1700000000123456\r\n" +
				"uptime_in_seconds:7\r\n\r\n# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:6380\r\n",
			serverInfo{Version: "7.0.15", Mode: "standalone", RunID: "f00d", Uptime: 7 * time.Second, Role: "slave",
				MasterAddr: "127.0.0.1:6380", ServerTime: time.UnixMicro(1700000000123456)}},
		{"cluster node", "# Server\r\nredis_mode:cluster\r\n", serverInfo{Mode: "cluster"}},
		{"master", "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n", serverInfo{Role: "master"}},
		{"valkey", "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\nrun_id:v1\r\n",
			serverInfo{Version: "8.0.1", Server: "valkey", RunID: "v1"}},
		{"valkey, its version first", "valkey_version:8.1.0\r\nredis_version:7.2.4\r\n",
			serverInfo{Version: "8.1.0", Server: "valkey"}},
		{"bad numbers", "uptime_in_seconds:x\r\nserver_time_usec:-3\r\n", serverInfo{}},
	} {
		got := parseServerInfo(tc.txt)
		if !got.ServerTime.Equal(tc.want.ServerTime) {
			t.Errorf("%s: server time %v, want %v", tc.name, got.ServerTime, tc.want.ServerTime)
		}
		got.ServerTime, tc.want.ServerTime = time.Time{}, time.Time{}
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
