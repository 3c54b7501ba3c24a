package llm

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"
)

// Config builds one provider client.
type Config struct {
	// Provider is Anthropic, OpenAI or Google.
	Provider string
	// Model is the model every turn asks for; "" means DefaultModels.
	Model string
	// APIKey is passed to the SDK explicitly; it is required.
	APIKey string
	// BaseURL is the API's address ("" means the provider's public one).
	// For OpenAI it includes the version ("http://127.0.0.1:PORT/v1/").
	BaseURL string
	// HTTPClient is the client the SDK uses; nil means one with Timeout.
	HTTPClient *http.Client
	// Timeout bounds one turn; 0 means 2 minutes.
	Timeout time.Duration
}

// Public endpoints, used when Config.BaseURL is empty.
var publicBaseURLs = map[string]string{
	Anthropic: "https://api.anthropic.com/",
	OpenAI:    "https://api.openai.com/v1/",
	Google:    "https://generativelanguage.googleapis.com/",
}

// KeyEnv is the variable FromEnv reads each provider's key from.
var KeyEnv = map[string]string{
	Anthropic: "ANTHROPIC_API_KEY",
	OpenAI:    "OPENAI_API_KEY",
	Google:    "GEMINI_API_KEY",
}

// BaseURLEnv is the variable FromEnv reads a provider's base URL from (a
// proxy or gateway), only for the provider the run names.
var BaseURLEnv = map[string]string{
	Anthropic: "ANTHROPIC_BASE_URL",
	OpenAI:    "OPENAI_BASE_URL",
	Google:    "GOOGLE_GEMINI_BASE_URL",
}

// New builds the provider cfg names.
func New(cfg Config) (Provider, error) {
	if _, ok := publicBaseURLs[cfg.Provider]; !ok {
		return nil, &Error{Provider: cfg.Provider, Kind: KindConfig,
			Message: fmt.Sprintf("unknown provider %q (want one of %s)", cfg.Provider, strings.Join(Providers, ", "))}
	}
	if cfg.APIKey == "" {
		return nil, &Error{Provider: cfg.Provider, Kind: KindConfig, Message: "no API key"}
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModels[cfg.Provider]
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = publicBaseURLs[cfg.Provider]
	}
	if !strings.HasSuffix(cfg.BaseURL, "/") {
		cfg.BaseURL += "/"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: cfg.Timeout}
	}
	switch cfg.Provider {
	case Anthropic:
		return newAnthropic(cfg), nil
	case OpenAI:
		return newOpenAI(cfg), nil
	default:
		return newGoogle(cfg)
	}
}

// FromEnv builds the named provider with its key from the environment
// (ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY; only the named
// provider's variables are read) and model ("" for the default).
func FromEnv(provider, model string) (Provider, error) {
	env, ok := KeyEnv[provider]
	if !ok {
		return New(Config{Provider: provider}) // the unknown-provider error
	}
	key := os.Getenv(env)
	if key == "" {
		return nil, &Error{Provider: provider, Kind: KindConfig, Message: env + " is not set"}
	}
	return New(Config{Provider: provider, Model: model, APIKey: key, BaseURL: os.Getenv(BaseURLEnv[provider])})
}

// client is what every adapter keeps; its String and LogValue never show
// the key.
type client struct {
	name  string
	model string
	key   secret
}

func (c *client) Name() string  { return c.name }
func (c *client) Model() string { return c.model }

func (c *client) String() string   { return c.name + "/" + c.model }
func (c *client) GoString() string { return c.String() }

// LogValue keeps the key out of slog output.
func (c *client) LogValue() slog.Value {
	return slog.GroupValue(slog.String("provider", c.name), slog.String("model", c.model))
}
