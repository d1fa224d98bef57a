package seal

import (
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// DataConverter is the data converter of every Remedy part that talks to
// Temporal: the SDK's default conversions, plus a person's payloads for the
// types that accept them, all sealed under keys.
func DataConverter(keys *Keyring) converter.DataConverter {
	return NewDataConverter(keys, time.Time{})
}

// NewDataConverter is DataConverter that, when unsealedBefore is set, also
// accepts the unsealed payloads a previous release recorded before that
// moment, and nothing else unsealed (migrate.go).
func NewDataConverter(keys *Keyring, unsealedBefore time.Time) converter.DataConverter {
	return &sealed{DataConverter: converter.NewCodecDataConverter(payloadConverters(), &Codec{Keys: keys}), keys: keys, cutoff: unsealedBefore}
}

func payloadConverters() converter.DataConverter {
	return converter.NewCompositeDataConverter(
		converter.NewNilPayloadConverter(),
		converter.NewByteSlicePayloadConverter(),
		converter.NewProtoJSONPayloadConverter(),
		converter.NewProtoPayloadConverter(),
		converter.NewJSONPayloadConverter(),
		PersonConverter{},
	)
}

// FailureConverter seals failures' messages and stack traces too: an error's
// text can carry what a payload would. A refused payload fails its activity
// or run for good (failure.go).
func FailureConverter(dc converter.DataConverter) converter.FailureConverter {
	return refusalFailures{temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc, EncodeCommonAttributes: true})}
}

// PlainDataConverter reads what Unseal leaves: the SDK's conversions and a
// person's payloads, without sealing. Replayers of unsealed histories use it.
func PlainDataConverter() converter.DataConverter { return payloadConverters() }
