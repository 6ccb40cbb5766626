// Package resultstoretest is the conformance suite of
// [compaction.ResultStore]: every implementation — the in-memory LRU
// ([compaction.MemoryStore]), the JetStream object store — runs the same
// [Run] against a fresh store per subtest:
//
//	func TestObjectResultStore(t *testing.T) {
//		resultstoretest.Run(t, func(t *testing.T) compaction.ResultStore { return newStore(t) })
//	}
package resultstoretest
