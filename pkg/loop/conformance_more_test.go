package loop_test

// moreScenarios returns the scenario groups of the later sections of
// LOVIA-SEMANTICS §8 (guardrails onward).
func moreScenarios() [][]scenario {
	return [][]scenario{guardScenarios, steerScenarios, persistScenarios, streamScenarios, compactionScenarios}
}
