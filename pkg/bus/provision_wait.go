package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrJetStreamDisabled is a server that answers but has JetStream off:
// no cluster forming, a configuration to fix. Provision fails with it at
// once instead of waiting.
var ErrJetStreamDisabled = errors.New("bus: JetStream is not enabled on the NATS server\n  hint: start nats-server with -js (or a jetstream {} block in its config), or point --nats at a server that has it")

// JetStreamDisabled tells a server without JetStream from a cluster that
// cannot answer yet, after err (no responders for a JetStream API
// request): the account info request answers "jetstream not enabled"
// only from a server that has it off. It returns ErrJetStreamDisabled
// wrapping err for such a server, else nil. Provision and the store's
// start-up both wait out a forming cluster but fail at once with it.
func JetStreamDisabled(ctx context.Context, js jetstream.JetStream, err error) error {
	if !errors.Is(err, nats.ErrNoResponders) {
		return nil
	}
	_, aerr := js.AccountInfo(ctx)
	if errors.Is(aerr, jetstream.ErrJetStreamNotEnabled) || errors.Is(aerr, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("%w: %w", ErrJetStreamDisabled, err)
	}
	return nil
}
