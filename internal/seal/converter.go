package seal

import (
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// DataConverter is the data converter of every Remedy part that talks to
// Temporal: the SDK's default conversions, plus a person's payloads for the
// types that accept them, all sealed under keys.
func DataConverter(keys *Keyring) converter.DataConverter {
	parent := converter.NewCompositeDataConverter(
		converter.NewNilPayloadConverter(),
		converter.NewByteSlicePayloadConverter(),
		converter.NewProtoJSONPayloadConverter(),
		converter.NewProtoPayloadConverter(),
		converter.NewJSONPayloadConverter(),
		PersonConverter{},
	)
	return converter.NewCodecDataConverter(parent, &Codec{Keys: keys})
}

// FailureConverter seals failures' messages and stack traces too: an error's
// text can carry what a payload would.
func FailureConverter(dc converter.DataConverter) converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc, EncodeCommonAttributes: true})
}
