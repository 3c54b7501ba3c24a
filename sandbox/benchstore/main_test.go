package benchstore_test

import (
	"testing"

	"github.com/commitlayer/commitlayer/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
