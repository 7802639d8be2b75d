package activities

import "errors"

// validateCall checks what every model-call request needs: a model, a
// credential scope name, messages, and max tokens (they bound the output and
// the token reservation).
func validateCall(model, credential string, messages int, maxTokens int64) error {
	switch {
	case model == "":
		return errors.New("model is required")
	case credential == "":
		return errors.New("credential (a credential scope name) is required")
	case messages == 0:
		return errors.New("messages are empty")
	case maxTokens <= 0:
		return errors.New("max tokens are required: they bound the output and the token reservation")
	}
	return nil
}

// reservedOutput is the output a call reserves where the provider meters
// output as it is produced: the expected visible output plus the thinking
// budget (thinking is output), at most maxTokens; zero when no expectation is
// given (the profile then reserves maxTokens).
func reservedOutput(expected, thinking, maxTokens int64) int64 {
	if expected <= 0 {
		return 0
	}
	return min(expected+thinking, maxTokens)
}
