//! The unit tests of calling a procedure.
use super::*;

#[test]
fn parameters_are_sent_as_the_types_the_procedures_take() {
    let cases: [(&(dyn ToSql + Sync), Type); 8] = [
        (&1i64, Type::INT8),
        (&1i32, Type::INT4),
        (&1i16, Type::INT2),
        (&true, Type::BOOL),
        (&b"x".as_slice(), Type::BYTEA),
        (&"x", Type::TEXT),
        (&vec![1i64], Type::INT8_ARRAY),
        (&None::<i64>, Type::INT8),
    ];
    for (value, want) in cases {
        assert_eq!(param_type(value).unwrap(), want, "{value:?}");
    }
}
