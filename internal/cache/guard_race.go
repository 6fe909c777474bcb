//go:build race

package cache

// guardShared is set in race builds (the README's test command): the cache
// then checks that no reader modified an object it handed out shared.
const guardShared = true
