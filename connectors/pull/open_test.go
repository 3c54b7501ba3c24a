package pull

import "github.com/commitlayer/commitlayer"

// Open returns the Puller of a connector given by its parts, nothing
// sealed: url for http_events (and stripe's base), the JSON configuration
// for postgres and http_json (validated; errors name the field).
func Open(kind, url string, config []byte, opts Options) (Puller, error) {
	return OpenConnector("", commitlayer.Connector{Kind: kind, URL: url, Config: config}, opts)
}
