use super::*;

fn http(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> Request {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let query = query
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    Request(types::Request::Http(types::HttpRequest {
        method: method.into(),
        url: url.into(),
        path: path.into(),
        query,
        headers: headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        cookies: vec![("session".into(), "abc".into())],
        body: body.as_bytes().to_vec(),
        base_url: "http://localhost:8080".into(),
        path_parameters: vec![("id".into(), "42".into())],
    }))
}

fn render_for(template: &str, req: &Request) -> String {
    let model = json!({"request": request_model(req, None), "parameters": {"greeting": "hi"}});
    render_str(template, &model).unwrap_or_else(|e| panic!("{template}: {e}"))
}

fn r(template: &str) -> String {
    let req = http(
        "POST",
        "/users/42/orders?status=open&tag=a&tag=b",
        &[("content-type", "application/json"), ("x-trace", "t-1")],
        r#"{"name":"Ada","items":[{"id":1},{"id":2}],"total":12.5}"#,
    );
    render_for(template, &req)
}

#[test]
fn request_model_matches_wiremocks_names() {
    assert_eq!(
        r("{{request.url}}"),
        "/users/42/orders?status=open&tag=a&tag=b" // no HTML escaping, as WireMock 3
    );
    assert_eq!(
        r("{{{request.url}}}"),
        "/users/42/orders?status=open&tag=a&tag=b"
    );
    assert_eq!(r("{{request.path}}"), "/users/42/orders");
    assert_eq!(
        r("{{request.pathSegments.[1]}} {{request.path.[2]}}"),
        "42 orders"
    );
    assert_eq!(r("{{request.path.id}}"), "42");
    assert_eq!(
        r("{{request.query.status}} {{request.query.tag.[1]}}"),
        "open b"
    );
    assert_eq!(
        r("{{request.headers.X-Trace}} {{request.headers.[Content-Type]}}"),
        "t-1 application/json"
    );
    assert_eq!(
        r("{{request.cookies.session}} {{request.method}}"),
        "abc POST"
    );
    assert_eq!(
        r("{{request.baseUrl}} {{request.port}}"),
        "http://localhost:8080 8080"
    );
    assert_eq!(r("{{request.requestLine.pathSegments.[0]}}"), "users");
    assert_eq!(r("{{parameters.greeting}} {{missing.thing}}!"), "hi !");
}

#[test]
fn json_and_xml_helpers() {
    assert_eq!(r("{{jsonPath request.body '$.name'}}"), "Ada");
    assert_eq!(r("{{jsonPath request.body '$.total'}}"), "12.5");
    // An object as Jackson's pretty printer writes it, a list as compact JSON.
    assert_eq!(
        r("{{{jsonPath request.body '$.items[0]'}}}"),
        "{\n  \"id\" : 1\n}"
    );
    assert_eq!(
        r("{{jsonPath request.body '$.items'}}"),
        r#"[{"id":1},{"id":2}]"#
    );
    assert_eq!(r("{{jsonPath request.body '$.items.length()'}}"), "2");
    assert_eq!(
        r("{{jsonPath request.body '$.items[?(@.id > 1)].id'}}"),
        "[2]"
    );
    assert_eq!(
        r("{{#each (jsonPath request.body '$.items')}}[{{id}}]{{/each}}"),
        "[1][2]"
    );
    assert_eq!(
        r("{{jsonPath request.body '$.nope' default='none'}}"),
        "none"
    );
    assert_eq!(
        r("{{#with (parseJson request.body)}}{{name}}{{/with}}"),
        "Ada"
    );
    assert_eq!(r("{{{toJson (array 1 'a')}}}"), r#"[ 1, "a" ]"#);
    let soap = http(
        "POST",
        "/soap",
        &[],
        r#"<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><m:Get xmlns:m="urn:x"><m:Id>7</m:Id></m:Get></soap:Body></soap:Envelope>"#,
    );
    assert_eq!(
        render_for("{{soapXPath request.body '/Get/Id/text()'}}", &soap),
        "7"
    );
    let xml = http(
        "POST",
        "/x",
        &[],
        "<order><id>17</id><item>a</item><item>b</item></order>",
    );
    assert_eq!(
        render_for("{{xPath request.body '/order/id/text()'}}", &xml),
        "17"
    );
    assert_eq!(
        render_for("{{xPath request.body 'count(/order/item)'}}", &xml),
        "2"
    );
    // The parsed document is kept for the next call: a different body is parsed
    // afresh, and the first one's values come back right after.
    let other = http("POST", "/x", &[], "<order><id>18</id></order>");
    let both = "{{xPath request.body '/order/id/text()'}}";
    assert_eq!(render_for(both, &other), "18");
    assert_eq!(render_for(both, &xml), "17");
    assert_eq!(render_for(both, &other), "18");
}

#[test]
fn json_path_filters_understand_jayways_regex_operator() {
    let req = http(
        "POST",
        "/search",
        &[],
        r#"{"hits":[{"id":"a","q":"CVE-2021-44228 log4j"},{"id":"b","q":"cve-2022-1"},
                    {"id":"c","q":"path/to/x"},{"id":"d","q":"it's"},{"id":"e","tags":["x","y"]}]}"#,
    );
    let t = |path: &str| render_for(&format!("{{{{jsonPath request.body \"{path}\"}}}}"), &req);
    // A full match, as Jayway's `Matcher.matches()`.
    assert_eq!(t("$.hits[?(@.q =~ /.*CVE-2021-44228.*/)].id"), r#"["a"]"#);
    assert_eq!(t("$.hits[?(@.q =~ /CVE/)].id"), "[]");
    // Flags, an escaped `/`, a quote in the regex, a list on the left.
    assert_eq!(t("$.hits[?(@.q =~ /cve-.*/i)].id"), r#"["a","b"]"#);
    // (The template's string literal is read as JSON: `\\/` there is Jayway's `\/`.)
    assert_eq!(t(r"$.hits[?(@.q =~ /path\\/to\\/.*/)].id"), r#"["c"]"#);
    assert_eq!(t("$.hits[?(@.q =~ /it's/)].id"), r#"["d"]"#);
    assert_eq!(t("$.hits[?(@.tags =~ /y/)].id"), r#"["e"]"#);
    // A regex the regex crate cannot run (look-ahead) is a bad path, not "no match".
    assert_eq!(
        t("$.hits[?(@.q =~ /(?=x).*/)].id"),
        "[ERROR: $.hits[?(@.q =~ /(?=x).*/)].id is not a valid JSONPath expression]"
    );
}

#[test]
fn string_number_and_logic_helpers() {
    assert_eq!(
        r("{{upper 'ab'}}{{lower 'CD'}}{{capitalize 'hello world'}}"),
        "ABcdHello World"
    );
    assert_eq!(
        r("[{{trim '  x '}}]{{substring 'abcdef' 1 3}}{{replace 'a-b' '-' '+'}}"),
        "[x]bca+b"
    );
    assert_eq!(r("{{#each (array 'a' 'b')}}({{this}}){{/each}}"), "(a)(b)");
    assert_eq!(
        r("{{{base64 'hi'}}} {{base64 'aGk=' decode=true}}"),
        "aGk= hi"
    );
    assert_eq!(
        r("{{urlEncode 'a b&c'}} {{urlEncode 'a+b%26c' decode=true}}"),
        "a+b%26c a b&c"
    );
    assert_eq!(r("{{regexExtract 'order-123' '[0-9]+'}}"), "123");
    assert_eq!(
        r("{{regexExtract 'ab-12' '([a-z]+)-([0-9]+)' 'parts'}}{{parts.[1]}}"),
        "12"
    );
    assert_eq!(
        r("{{math 1 '+' 2}} {{math 7 '/' 2}} {{math 2.5 '*' 2}} {{math 10.0 '/' 4}}"),
        "3 4 5.0 2.5"
    );
    assert_eq!(r("{{size 'abc'}} {{size (array 1 2)}}"), "3 2");
    assert_eq!(r("{{#each (range 1 3)}}{{this}}{{/each}}"), "123");
    assert_eq!(r("{{join (array 1 2 3) ','}}"), "1,2,3");
    assert_eq!(r("{{arrayJoin ',' (array 1 2 3)}}"), "1,2,3");
    assert_eq!(
        // A query value is a list: WireMock 3.13 compares it unequal to a string.
        r(
            "{{#if (eq request.query.status 'open')}}yes{{else}}no{{/if}} {{#if (eq request.query.status.first 'open')}}yes{{/if}}"
        ),
        "no yes"
    );
    assert_eq!(r("{{#if (and (gt 3 2) (not (lt 3 2)))}}ok{{/if}}"), "ok");
    assert_eq!(r("{{#if (neq request.method 'GET')}}post{{/if}}"), "post");
}

#[test]
fn random_and_date_helpers() {
    let v = r("{{randomValue length=12 type='ALPHANUMERIC' uppercase=true}}");
    assert_eq!(v.len(), 12);
    assert!(
        v.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()),
        "{v}"
    );
    assert_eq!(r("{{randomValue type='UUID'}}").len(), 36);
    let n: i64 = r("{{randomInt lower=5 upper=9}}").parse().unwrap();
    assert!((5..=9).contains(&n));
    assert!(["a", "b"].contains(&r("{{pickRandom 'a' 'b'}}").as_str()));
    assert_eq!(
        r("{{date (parseDate '2024-01-31T12:00:00Z') offset='1 days' format='yyyy-MM-dd'}}"),
        "2024-02-01"
    );
    assert_eq!(
        r("{{date (parseDate '31/01/2024' format='dd/MM/yyyy') format='epoch'}}"),
        "1706659200000"
    );
    let year: i32 = r("{{now format='yyyy'}}").parse().unwrap();
    assert!(year >= 2024);
    assert!(r("{{now offset='-1 hours'}}").ends_with('Z'));
}

/// Jayway's word operators in `jsonPath`, as WireMock 3.13.2 rendered the same
/// template and body.
#[test]
fn json_path_reads_jayways_word_operators() {
    assert_eq!(
        r(
            "[{{jsonPath request.body '$.items[?(@.id in [2, 3])].id'}}] \
           [{{jsonPath request.body '$.items[?(@.id nin [2])]'}}]"
        ),
        r#"[[2]] [[{"id":1}]]"#
    );
}

/// Each character set of WireMock 3.13.2's `randomValue`, lower-cased unless
/// `uppercase`; a type it does not define is printable ASCII (its fallback), not an
/// error.
#[test]
fn random_value_uses_wiremocks_sets_and_case_and_accepts_any_type() {
    let all = |template: &str, ok: &dyn Fn(char) -> bool| {
        // 2,000 characters: each set's every class shows up, whatever the draw.
        let v = r(template);
        assert_eq!(v.chars().count(), 2000, "{template}: {v}");
        assert!(v.chars().all(ok), "{template}: {v}");
        v
    };
    let v = all("{{randomValue length=2000}}", &|c| {
        c.is_ascii_lowercase() || c.is_ascii_digit()
    });
    assert!(v.chars().any(|c| c.is_ascii_digit()), "{v}");
    all("{{randomValue length=2000 type='ALPHABETIC'}}", &|c| {
        c.is_ascii_lowercase()
    });
    all(
        "{{randomValue length=2000 type='ALPHABETIC' uppercase=true}}",
        &|c| c.is_ascii_uppercase(),
    );
    all("{{randomValue length=2000 type='HEXADECIMAL'}}", &|c| {
        c.is_ascii_digit() || ('a'..='f').contains(&c)
    });
    let symbols = all(
        "{{randomValue length=2000 type='ALPHANUMERIC_AND_SYMBOLS'}}",
        &|c| ('!'..='}').contains(&c) && !c.is_ascii_uppercase(),
    );
    assert!(symbols.contains('\\'), "{symbols}");
    for kind in ["number", "string", "numeric", "NUMBER"] {
        let v = all(
            &format!("{{{{randomValue length=2000 type='{kind}'}}}}"),
            &|c| (' '..='~').contains(&c) && !c.is_ascii_uppercase(),
        );
        assert!(v.contains(' ') && v.contains('~'), "{kind}: {v}");
    }
    assert_eq!(r("{{randomValue length=0 type='number'}}"), "");
    let id = r("{{randomValue type='UUID' uppercase=true}}");
    assert_eq!(id.len(), 36);
    assert_eq!(id, id.to_uppercase());
}

/// As Handlebars.java in WireMock 3.13.2: a name that is no helper and has no
/// arguments is a missing value (nothing, or a section's `else`); with arguments
/// it is an error.
#[test]
fn an_unknown_name_without_arguments_is_a_missing_value() {
    assert_eq!(r("[{{foo}}]"), "[]");
    assert_eq!(r("[{{{foo}}}]"), "[]");
    assert_eq!(r("[{{foo.bar}}]"), "[]");
    assert_eq!(r("[{{#foo}}x{{/foo}}]"), "[]");
    assert_eq!(r("[{{#foo}}x{{else}}y{{/foo}}]"), "[y]");
    // A section over a value that is there, as WireMock rendered the same template
    // with the same transformerParameters.
    assert_eq!(r("[{{#parameters}}{{greeting}}{{/parameters}}]"), "[hi]");
    let model = json!({"request": {}});
    for t in ["{{foo bar}}", "{{foo a=1}}", "{{#foo bar}}x{{/foo}}"] {
        let e = render_str(t, &model).unwrap_err();
        assert!(e.0.contains("foo"), "{t}: {e:?}");
    }
}

#[test]
fn failures_are_errors_not_panics() {
    // As WireMock: some failures are an inline text, others fail the response.
    let model = json!({"request": {"body": "{not json"}});
    assert_eq!(
        render_str("{{jsonPath request.body '$.a'}}", &model).unwrap(),
        "[ERROR: {not json is not valid JSON]"
    );
    let text = json!({"request": {"body": "plain text"}});
    assert_eq!(
        render_str("{{jsonPath request.body '$.a'}}", &text).unwrap(),
        ""
    );
    assert!(compile("{{#if}}").is_err());
    assert!(render_str("{{math 1 '/' 0}}", &json!({})).is_err());
    assert!(render_str("{{parseJson 'bad'}}", &json!({})).is_err());
    assert!(render_str("{{nope 1}}", &json!({})).is_err());
    assert_eq!(render_str("[{{nope}}]", &json!({})).unwrap(), "[]");
    assert_eq!(
        render_str("{{math 1 '^' 2}}", &json!({})).unwrap(),
        "[ERROR: ^ is not a valid mathematical operator]"
    );
}

#[test]
fn the_model_holds_only_what_templates_use() {
    let n =
        Needs::of("{{request.path.[1]}} {{request.headers.X-A}} {{jsonPath request.body '$.a'}}");
    assert!(!n.all && !n.parameters);
    assert_eq!(n.fields, vec!["pathSegments", "headers", "body"]);
    assert!(Needs::of("{{#with request}}{{path}}{{/with}}").all);
    assert!(Needs::of("{{parameters.x}}").parameters);
}

#[test]
fn transform_templates_body_and_headers_once_per_mapping() {
    let ctx = Context(types::CallContext {
        mapping_id: "m1".into(),
        mapping_name: None,
        parameters: "{}".into(),
    });
    let req = http("GET", "/things/9?x=1", &[], "");
    let mut resp = Response::http(200);
    resp.set_body("id={{request.pathSegments.[1]}}");
    resp.set_header("location", "/things/{{request.query.x}}");
    let out = ResponseTemplate::transform(&ctx, &req, resp.clone()).unwrap();
    assert_eq!(out.body_text(), "id=9");
    assert_eq!(out.headers()[0].1, "/things/1");
    // Same mapping, new text (a reload): the new text is used.
    resp.set_body("v2 {{request.method}}");
    let out = ResponseTemplate::transform(&ctx, &req, resp).unwrap();
    assert_eq!(out.body_text(), "v2 GET");
    // A body without {{ is passed through, and binary bodies are never touched.
    let mut bin = Response::http(200);
    bin.set_body(vec![0xff, b'{', b'{']);
    let out = ResponseTemplate::transform(&ctx, &req, bin).unwrap();
    assert_eq!(out.body(), &[0xff, b'{', b'{']);
}

fn mq(properties: &[(&str, &str)], reply_to: Option<&str>) -> Request {
    Request(types::Request::Mq(types::MqMessage {
        destination: "ORDERS.REQ".into(),
        reply_to: reply_to.map(str::to_owned),
        message_id: Some("414d5120".into()),
        correlation_id: None,
        properties: properties
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        body: b"<order id=\"7\"/>".to_vec(),
    }))
}

#[test]
fn direct_rendering_gives_what_handlebars_gives() {
    decoy_plugin::request_info::testing::set_client_ip(Some("192.0.2.9"));
    decoy_plugin::request_info::testing::set_hostname("test-host");
    let requests = [
        http(
            "POST",
            "/users/42/caf%C3%A9/x%2Fy?status=open&tag=a&tag=b&empty=",
            &[
                ("Content-Type", "application/json"),
                ("x-trace", "t-1"),
                ("X-TRACE", "t-2"),
            ],
            "{\"a\":1}",
        ),
        http("GET", "/", &[], ""),
        Request(types::Request::Http(types::HttpRequest {
            method: "PUT".into(),
            url: "/a".into(),
            path: "/a".into(),
            query: vec![],
            headers: vec![],
            cookies: vec![],
            body: vec![0xff, 0xfe, b'x'],
            base_url: "https://example.test".into(),
            path_parameters: vec![],
        })),
        http(
            "GET",
            "/proxied",
            &[("X-Forwarded-For", "203.0.113.7, 10.0.0.1")],
            "",
        ),
        http("GET", "/empty-forward", &[("x-forwarded-for", "")], ""),
        mq(&[("Region", "eu"), ("region", "us")], Some("ORDERS.REPLY")),
        mq(&[], None),
    ];
    let templates = [
        "{{request.url}}",
        "{{{request.url}}}",
        "{{ request.path }}",
        "{{request.method}}|{{request.body}}",
        "{{request.baseUrl}} {{request.scheme}} {{request.host}} {{request.port}}",
        "{{request.pathSegments.[0]}}/{{request.pathSegments.[2]}}/{{request.pathSegments.[3]}}/{{request.pathSegments.[9]}}",
        "{{request.path.[1]}}",
        "{{request.query.status}} {{request.query.tag}} [{{request.query.empty}}] [{{request.query.none}}]",
        "{{request.headers.Content-Type}} {{request.headers.[x-trace]}} {{request.headers.X-Trace}} [{{request.headers.region}}]",
        "{{request.cookies.session}} [{{request.cookies.none}}]",
        "{{request.path.id}} [{{request.pathParams.none}}]",
        "{{request.destination}} {{request.replyTo}} {{request.messageId}} [{{request.correlationId}}]",
        "{{request.headers.Region}} {{request.headers.[REGION]}}",
        "a {{!-- a comment --}} b {{! another }}c",
        "  {{~request.method~}}  \n x {{~request.url}}",
        "plain text with { braces } and no template",
        "\\{{request.url}} escaped",
        "{{request.requestLine.path}}",
        "{{this.request.url}}",
        "{{request.clientIp}} [{{request.clientIp}}]",
    ];
    let helper_templates = [
        "{{upper request.url}} {{lower request.method}}",
        "{{jsonPath request.body '$.a'}}",
        "{{jsonPath request.body '$.missing' default='none'}}",
        "{{xPath request.body '/order/@id'}} {{xPath request.body 'count(/order)'}}",
        "{{{xPath request.body '/order/@id'}}}",
        "{{soapXPath request.body '/order'}}",
        "{{math request.port '+' 1}}",
        "{{substring request.path 1 3}}",
        "{{base64 request.method}} {{urlEncode request.url}}",
        "{{regexExtract request.url '[0-9]+'}}",
        "{{capitalize request.headers.X-Trace}} {{upper request.query.tag}}",
        "{{pickRandom 'only'}}",
        "{{jsonPath request.body '$'}} {{jsonPath request.body '$.a.length()'}}",
        "{{toJson request.body}} {{formatJson request.body}}",
        "{{math request.port '/' 7}} {{abbreviate request.url 5}}",
        "{{stringFormat '%s!' request.method}} {{replace request.path '/' '-'}}",
        "{{hostname}} {{upper request.clientIp}}",
    ];
    for template in templates.iter().chain(&helper_templates) {
        let compiled = compile(template).unwrap();
        let direct =
            Direct::of(&compiled).unwrap_or_else(|| panic!("{template:?} should render directly"));
        // What the host renders itself (no helper): the same, from the same fields.
        let plain = decoy_template::Plain::of(&decoy_template::compile(template).unwrap());
        assert_eq!(
            plain.is_some(),
            templates.contains(template),
            "{template:?}: only helper-free templates are plain"
        );
        for req in &requests {
            let model =
                json!({"request": request_model(req, None), "parameters": {"greeting": "hi"}});
            let expected = render(&compiled, &handlebars::Context::from(model)).map_err(|e| e.0);
            assert_eq!(
                direct.render(req).map_err(|e| e.0),
                expected,
                "{template:?} on {:?}",
                req.0
            );
            if let Some(plain) = &plain {
                assert_eq!(
                    Ok(plain.render(&direct::View(req))),
                    expected,
                    "{template:?} rendered plain on {:?}",
                    req.0
                );
            }
        }
    }
    for template in [
        "{{request.query}}",
        "{{request.pathSegments}}",
        "{{request.pathSegments.x}}",
        "{{size request.query.tag}}",
        "{{join request.query.tag ','}}",
        "{{regexExtract request.url '([0-9]+)' 'n'}}{{n}}",
        "{{val request.url assign='x'}}",
        "{{#contains request.url 'a'}}y{{/contains}}",
        "{{request.query.tag.[1]}}",
        "{{request}}",
        "{{parameters.greeting}}",
        "{{upper parameters.greeting}}",
        "{{upper (lower request.url)}}",
        "{{upper request.query}}",
        "{{jsonPath request.body '$.a' default=request.url}}",
        "{{eq request.method 'GET'}}",
        "{{#if request.url}}x{{/if}}",
        "{{request.url.length}}",
        "{{> partial}}",
        "{{request.parts.info.body}}",
        "{{request.parts}}",
    ] {
        assert!(
            Direct::of(&compile(template).unwrap()).is_none(),
            "{template:?} needs Handlebars"
        );
    }
}

#[test]
fn message_properties_are_found_whatever_the_case_of_their_name() {
    // Template paths to headers are lower-cased (HTTP header names are
    // case-insensitive); a message property named in mixed case is found too.
    let req = mq(&[("OrderType", "priority")], None);
    for template in [
        "{{request.headers.OrderType}}",
        "{{request.headers.ordertype}}",
        "{{upper request.headers.OrderType}}",
        "{{#with request.headers}}{{ordertype}}{{/with}}",
    ] {
        let out = render_for(template, &req);
        assert_eq!(out.to_lowercase(), "priority", "{template}");
        if let Some(d) = Direct::of(&compile(template).unwrap()) {
            assert_eq!(d.render(&req).unwrap(), out, "{template}");
        }
    }
}

#[test]
fn a_direct_body_and_a_handlebars_header_in_one_response() {
    let ctx = Context(types::CallContext {
        mapping_id: "m2".into(),
        mapping_name: None,
        parameters: r#"{"greeting":"hi"}"#.into(),
    });
    let req = http("GET", "/things/9?x=1", &[("x-trace", "t-1")], "");
    let mut resp = Response::http(200);
    resp.set_body("id={{request.pathSegments.[1]}} trace={{request.headers.X-Trace}}");
    resp.set_header(
        "x-greeting",
        "{{upper parameters.greeting}} {{request.query.x}}",
    );
    resp.set_header("x-fixed", "no template");
    let out = ResponseTemplate::transform(&ctx, &req, resp.clone()).unwrap();
    assert_eq!(out.body_text(), "id=9 trace=t-1");
    assert_eq!(out.headers()[0].1, "HI 1");
    assert_eq!(out.headers()[1].1, "no template");
    // A header that stops being a template is passed through on the next call.
    resp.headers_mut()[0].1 = "static now".into();
    let out = ResponseTemplate::transform(&ctx, &req, resp).unwrap();
    assert_eq!(out.headers()[0].1, "static now");
    assert_eq!(out.body_text(), "id=9 trace=t-1");
}

#[test]
fn multi_valued_fields_are_lists_written_as_their_first_value() {
    assert_eq!(
        r(
            "{{request.query.tag}} {{request.query.tag.first}} {{request.query.tag.last}} {{request.query.tag.[1]}}"
        ),
        "a a b b"
    );
    assert_eq!(
        r(
            "{{#each request.query.tag}}<{{this}}>{{/each}} {{size request.query.tag}} {{lookup request.query.tag 1}}"
        ),
        "<a><b> 2 b"
    );
    assert_eq!(
        r("{{upper request.query.tag}} {{eq request.query.tag 'a'}}"),
        "A false"
    );
    assert_eq!(r("{{#with request.headers}}{{x-trace}}{{/with}}"), "t-1");
    assert_eq!(
        r("{{#each (array 1 2)}}{{request.method}}{{/each}}"),
        "POSTPOST"
    );
}

#[test]
fn values_print_as_wiremocks_java_objects() {
    assert_eq!(r("{{array 1 'a' 2.5}}"), "[1, a, 2.5]");
    assert_eq!(
        r("{{parseJson '{\"a\":1,\"b\":[1,2]}'}}"),
        "{a=1, b=[1, 2]}"
    );
    assert_eq!(
        r("{{toJson (parseJson '{\"a\":{},\"b\":[],\"c\":[{\"d\":1}]}')}}"),
        "{\n  \"a\" : { },\n  \"b\" : [ ],\n  \"c\" : [ {\n    \"d\" : 1\n  } ]\n}"
    );
    assert_eq!(helpers::java_double(1e20), "1.0E20");
    assert_eq!(helpers::java_double(0.3), "0.3");
}

#[test]
fn helpers_set_variables_for_the_rest_of_the_template() {
    assert_eq!(
        r("{{regexExtract 'ab-12' '([a-z]+)-([0-9]+)' 'parts'}}{{parts}} {{parts.[1]}}"),
        "ab 12"
    );
    assert_eq!(r("{{#assign 'v'}} x {{/assign}}[{{v}}]"), "[x]");
    assert_eq!(r("{{val 'q' assign='z'}}[{{z}}]"), "[q]");
    assert_eq!(r("{{parseJson request.body 'b'}}{{b.name}}"), "Ada");
    // Variables do not outlive their render.
    assert_eq!(r("[{{parts}}]"), "[]");
}

#[test]
fn block_forms() {
    assert_eq!(r("{{#contains 'abc' 'z'}}Y{{else}}N{{/contains}}"), "");
    assert_eq!(r("{{#matches 'abc' 'a.c'}}Y{{/matches}}"), "Y");
    assert_eq!(r("{{#neq 1 1}}Y{{else}}N{{/neq}}"), "N");
    assert_eq!(r("{{#trim}}  x  {{/trim}}"), "x");
    assert_eq!(
        r("{{#formatJson}}{\"x\":1}{{/formatJson}}"),
        "{\n  \"x\" : 1\n}"
    );
}

/// `formatJson` pretty-prints a tree as WireMock's `Json.prettyPrint` does: floats as
/// plain `BigDecimal`s (not `Double.toString`'s `1.0E20`), null members kept.
#[test]
fn format_json_prints_floats_as_plain_big_decimals_and_keeps_nulls() {
    assert_eq!(
        r("{{#formatJson}}{\"big\":1e20,\"small\":0.0001,\"n\":null}{{/formatJson}}"),
        "{\n  \"big\" : 100000000000000000000,\n  \"small\" : 0.0001,\n  \"n\" : null\n}"
    );
}

const MULTIPART: &str = "--b0\r\nContent-Disposition: form-data; name=\"info\"\r\nContent-Type: application/json\r\n\r\n{\"a\":1,\"b\":\"two\"}\r\n--b0\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\n\r\nline one\r\nline two\r\n--b0--\r\n";

fn multipart() -> Request {
    http(
        "POST",
        "/upload",
        &[("Content-Type", "multipart/form-data; boundary=b0")],
        MULTIPART,
    )
}

#[test]
fn parts_of_a_multipart_body_are_in_the_model_by_name() {
    let req = multipart();
    let t = |template: &str| render_for(template, &req);
    assert_eq!(t("{{request.parts.info.body}}"), "{\"a\":1,\"b\":\"two\"}");
    assert_eq!(t("{{request.parts.file.body}}"), "line one\r\nline two");
    assert_eq!(
        t("{{request.parts.info.name}} {{request.parts.file.name}}"),
        "info file"
    );
    assert_eq!(
        t(
            "{{request.parts.info.headers.Content-Type}}|{{request.parts.info.headers.[Content-Type]}}"
        ),
        "application/json|application/json"
    );
    assert_eq!(
        t("{{request.parts.file.headers.Content-Disposition}}"),
        "form-data; name=\"file\"; filename=\"notes.txt\""
    );
    assert_eq!(
        t("{{request.parts.info.binary}} {{request.parts.file.binary}}"),
        "false true"
    );
    assert_eq!(
        t("{{request.parts.file.bodyAsBase64}}"),
        "bGluZSBvbmUNCmxpbmUgdHdv"
    );
    assert_eq!(t("{{jsonPath request.parts.info.body '$.b'}}"), "two");
    assert_eq!(t("[{{request.parts.nope.body}}]"), "[]");
    assert_eq!(t("{{size request.parts}}"), "2");
    assert_eq!(
        t("{{#with request.parts.info}}{{name}}={{body}}{{/with}}"),
        "info={\"a\":1,\"b\":\"two\"}"
    );
    // Header names are lower case, as WireMock's parser gives them; a path to one
    // is found whatever its case.
    assert_eq!(
        t(
            "{{#each request.parts.info.headers}}{{@key}};{{/each}} {{request.parts.info.headers.CONTENT-TYPE}}"
        ),
        "content-disposition;content-type; application/json"
    );
    // Printed whole, as WireMock's objects print.
    assert_eq!(
        t("{{request.parts.info.headers}}"),
        "{content-disposition=form-data; name=\"info\", content-type=application/json}"
    );
    assert_eq!(
        t("{{request.parts.info}}"),
        "[name='info', headers={content-disposition=form-data; name=\"info\", content-type=application/json}, body={\"a\":1,\"b\":\"two\"}]"
    );
    // A request that is not multipart has no parts.
    assert_eq!(
        r("[{{request.parts.info.body}}] {{request.isMultipart}}"),
        "[] false"
    );
}

#[test]
fn a_part_is_named_only_by_a_form_data_disposition_and_a_repeated_name_fails_templates_reading_parts()
 {
    let mixed = http(
        "POST",
        "/m",
        &[("Content-Type", "multipart/mixed; boundary=bb")],
        "--bb\r\nContent-Disposition: attachment; name=\"doc\"\r\n\r\n{}\r\n--bb\r\nContent-Disposition: form-data; name=\"x\"\r\nContent-Type: Application/JSON\r\n\r\n1\r\n--bb--\r\n",
    );
    assert_eq!(
        render_for(
            "[{{request.parts.doc.body}}] {{size request.parts}} {{request.parts.x.binary}}",
            &mixed
        ),
        "[] 1 true"
    );
    let twice = http(
        "POST",
        "/m",
        &[("Content-Type", "multipart/form-data; boundary=bb")],
        "--bb\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\none\r\n--bb\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\ntwo\r\n--bb--\r\n",
    );
    let ctx = Context(types::CallContext {
        mapping_id: "dup".into(),
        mapping_name: None,
        parameters: "{}".into(),
    });
    let mut resp = Response::http(200);
    resp.set_body("{{request.parts.a.body}}");
    let e = ResponseTemplate::transform(&ctx, &twice, resp.clone()).unwrap_err();
    assert!(e.0.contains("two parts are named \"a\""), "{e}");
    // A template that does not read the parts is not affected.
    resp.set_body("{{request.method}} {{upper request.url}}");
    let out = ResponseTemplate::transform(&ctx, &twice, resp).unwrap();
    assert_eq!(out.body_text(), "POST /M");
}

#[test]
fn the_client_ip_is_a_forwarded_for_header_or_the_peer_and_none_for_a_message() {
    decoy_plugin::request_info::testing::set_client_ip(Some("::1"));
    let t = "[{{request.clientIp}}]";
    // As Jetty writes an IPv6 peer.
    assert_eq!(
        render_for(t, &http("GET", "/", &[], "")),
        "[[0:0:0:0:0:0:0:1]]"
    );
    decoy_plugin::request_info::testing::set_client_ip(Some("2001:db8::a:1"));
    assert_eq!(
        render_for(t, &http("GET", "/", &[], "")),
        "[[2001:db8:0:0:0:0:a:1]]"
    );
    assert_eq!(
        render_for(
            t,
            &http("GET", "/", &[("X-Forwarded-For", "198.51.100.4")], "")
        ),
        "[198.51.100.4]"
    );
    decoy_plugin::request_info::testing::set_client_ip(None);
    assert_eq!(render_for(t, &mq(&[], None)), "[]");
    decoy_plugin::request_info::testing::set_hostname("build-7");
    assert_eq!(render_for("{{hostname}}", &mq(&[], None)), "build-7");
}

#[test]
fn host_and_port_come_from_a_base_url_without_its_default_port() {
    use crate::base_url_parts;
    assert_eq!(base_url_parts("http://a:8080"), ("http", "a", Some(8080)));
    assert_eq!(base_url_parts("http://a"), ("http", "a", Some(80)));
    assert_eq!(base_url_parts("https://a"), ("https", "a", Some(443)));
    assert_eq!(base_url_parts("http://[::1]:9"), ("http", "[::1]", Some(9)));
    assert_eq!(base_url_parts("http://[::1]"), ("http", "[::1]", Some(80)));
}

#[test]
fn a_template_that_does_not_compile_is_described_on_one_line_saying_where() {
    let message = |t: &str| compile(t).expect_err("does not compile").0;
    let unclosed = message("hello {{#if request.url}} unclosed");
    assert_eq!(
        unclosed,
        "bad template: invalid Handlebars syntax at line 1, column 35: the template ends \
         before a {{...}} or a {{#block}} is closed"
    );
    let stray = message("{\n  \"a\": \"{{request.path}\",\n  \"b\": 1\n}");
    assert!(!stray.contains('\n'), "{stray}");
    assert!(
        stray.starts_with("bad template: invalid Handlebars syntax at line 2"),
        "{stray}"
    );
    let mismatched = message("{{#each request.query.v}}x{{/if}}");
    assert!(
        mismatched.starts_with("bad template: helper \"each\" was opened, but \"if\" is closing"),
        "{mismatched}"
    );
    // Far into a large template (compiled in pieces), the position is the true one.
    let mut big: String = big_json_template().chars().take(30_000).collect();
    let at = big.len();
    big.push_str("\n  \"x\": \"{{request..path}}\"\n}");
    let late = message(&big);
    assert!(pieces::cuts(&big, pieces::PIECE).is_some());
    assert!(
        late.starts_with(
            "bad template: invalid Handlebars syntax at line 2, column 19, near \".path}}\"\""
        ),
        "{late} (the text before is {at} bytes)"
    );
}

/// A JSON body of about 250 KB with 540 `{{request.requestLine.baseUrl}}` in it, as
/// mobile apps' UI-test mocks have (image and link URLs pointing back at the mock).
pub(crate) fn big_json_template() -> String {
    let mut s = String::from("{\"items\":[");
    let mut i = 0;
    while s.len() < 250_000 {
        if i > 0 {
            s.push(',');
        }
        if i < 540 {
            s.push_str(&format!(
                "{{\"id\":{i},\"title\":\"Item {i}\",\"imageUrl\":\"{{{{request.requestLine.baseUrl}}}}/images/{i}.png\",\"description\":\"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua, ut enim ad minim veniam\",\"price\":{i}.99,\"tags\":[\"a\",\"b\"]}}"
            ));
        } else {
            s.push_str(&format!("{{\"id\":{i},\"title\":\"Item {i}\"}}"));
        }
        i += 1;
    }
    s.push_str("]}");
    s
}

fn whole(text: &str) -> handlebars::Template {
    handlebars::Template::compile(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Every place this lexer could cut, tried at once (pieces of one byte): the
/// pieces must give exactly what the whole text gives.
fn same_in_pieces(text: &str) {
    let Some(t) = pieces::compile(text, 1) else {
        // Not cut: compiled whole, which is the reference.
        return;
    };
    assert_eq!(
        without_positions(&t),
        without_positions(&whole(text)),
        "{text}"
    );
}

/// A template's elements, without the positions of the elements of its blocks
/// (counted from the start of their piece, they are not compared).
fn without_positions(t: &handlebars::Template) -> String {
    let positions = regex::Regex::new(r"TemplateMapping\(\d+, \d+\)").expect("valid");
    positions
        .replace_all(&format!("{:?}", t.elements), "_")
        .into_owned()
}

#[test]
fn a_template_compiled_in_pieces_is_the_template_compiled_whole() {
    let cases = [
        "plain text, long enough to be cut in many places",
        "a {{request.path}} b {{{request.body}}} c {{ {request.url} }} d",
        "x {{~request.path~}} y\n  {{request.method ~}}   z  {{~ request.url}} w",
        "{\n  \"a\": 1,\n  {{#if request.query.x}}\n  \"b\": \"{{request.query.x}}\",\n  {{else}}\n  \"b\": null,\n  {{/if}}\n  \"c\": 3\n}\n",
        "head {{ #if (eq request.method 'GET') }}yes{{ else }}no{{ /if }} tail",
        "{{#each request.query.tag}}[{{this}}]{{/each}} after {{#with request}}{{path}}{{/with}} end",
        "k {{!-- a comment with }} and {{x}} in it --}} v {{! short }} w {{!--}} z --}} q",
        "s {{jsonPath request.body '$.a}}b'}} t {{regexExtract request.path \"[a-z]+}}\" 'x'}} u",
        "p {{request.headers.[X-Trace]}} {{lookup request.query 'tag'}} r",
        "esc \\{{not a tag}} and {{request.path}} after",
        "raw {{{{raw}}}} {{request.path}} {{{{/raw}}}} end",
        "arr {{join (array 1 2 ']') ','}} end",
        "obj {{toJson {\"a\": {\"b\": 1}}}} end",
        "unicode é ü 日本 {{request.path}} ✓ end",
        "windows\r\n{{#if request.path}}\r\nline\r\n{{/if}}\r\nend",
        "mismatched {{#if a}} open",
        "closed too often {{/if}} after a long plain run of text here",
        "no text between tags {{request.path}}{{request.url}}{{request.method}}{{request.path}}{{request.url}}x{{request.path}}",
        "{{request.path}} starts and ends with a tag, with a long run of plain text between {{request.url}}",
        // Long runs of text inside blocks, set aside while the parser reads the tags.
        "{{#each request.query.tag}}{\"tag\": \"{{this}}\", \"text\": \"a long run of plain text in a block\"}{{/each}}",
        "{{#if request.path}}\n  a long run, then a standalone tag on a line of its own\n  {{else}}\n  the other long branch of the block, also long enough\n{{/if}}\nend",
        "{{#if a}}  trimmed:{{~ request.path ~}}  a long run of text between trims  {{~/if}} after",
        "{{#each a}}{{#each b}}inner: a long run of plain text, nested{{this}}another long run inside{{/each}}outer run, long enough to be set aside{{/each}}",
        "{{#if a}}first branch with a long run{{else if b}}second branch with a long run{{else}}third branch, long run{{/if}}",
        "{{#*inline \"row\"}}an inline partial with a long run of text{{/inline}}{{#> row}}a partial block's default text, long{{/row}}",
        "{{#if a}}\r\nwindows lines with a long run of text\r\n{{/if}}\r\n",
        "{{#if a}}é long run with unicode characters ü 日本 inside{{/if}}",
        "{{#if a}}a long run of text, {{! a comment }} then another long run of text{{/if}}",
        "{{#if a}}text with \u{e000} the mark character in it, long{{/if}}",
    ];
    for c in cases {
        let text = rewrite_paths(c);
        if handlebars::Template::compile(&text).is_ok() {
            same_in_pieces(&text);
        } else {
            assert!(pieces::compile(&text, 1).is_none(), "{c}");
        }
    }
    // Every template of the WireMock side-by-side fixtures.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let mut seen = 0;
    for dir in ["templating", "templating-helpers", "templating-model"] {
        let Ok(files) = std::fs::read_dir(root.join(dir).join("mappings")) else {
            continue;
        };
        for f in files.flatten() {
            let text = std::fs::read_to_string(f.path()).unwrap_or_default();
            for body in text.split("\"body\"").skip(1) {
                let Some(Value::String(b)) = serde_json::Deserializer::from_str(
                    body.trim_start().trim_start_matches(':').trim_start(),
                )
                .into_iter::<Value>()
                .next()
                .and_then(Result::ok) else {
                    continue;
                };
                let b = rewrite_paths(&b);
                if handlebars::Template::compile(&b).is_ok() {
                    same_in_pieces(&b);
                    seen += 1;
                }
            }
        }
    }
    assert!(seen > 50, "only {seen} fixture templates were read");
}

#[test]
fn a_250_kb_template_is_compiled_in_pieces_and_renders_every_expression() {
    let text = big_json_template();
    let cuts = pieces::cuts(&rewrite_paths(&text), pieces::PIECE).expect("it is cut");
    assert!(cuts.len() > 100, "{} cuts", cuts.len());
    let out = render_for(&text, &http("GET", "/feed", &[], ""));
    assert_eq!(out.matches("http://localhost:8080/images/").count(), 540);
    assert!(serde_json::from_str::<Value>(&out).is_ok());
    // The same, compiled whole, for a tenth of it (whole, it is slow: that is the point).
    let tenth: String = {
        let t = rewrite_paths(&text);
        let end = t[..25_000].rfind(',').expect("a comma");
        t[..end].to_owned()
    };
    let pieces = pieces::compile(&tenth, pieces::PIECE).expect("it is cut");
    assert_eq!(
        without_positions(&pieces),
        without_positions(&whole(&tenth))
    );
}

#[test]
fn a_template_is_compiled_once_however_many_calls_render_it() {
    let ctx = Context(types::CallContext {
        mapping_id: "big".into(),
        mapping_name: None,
        parameters: "{}".into(),
    });
    let req = http("GET", "/feed", &[], "");
    let mut resp = Response::http(200);
    resp.set_body(big_json_template());
    resp.set_header("location", "{{request.requestLine.baseUrl}}/feed");
    let before = compilations();
    for _ in 0..100 {
        let out = ResponseTemplate::transform(&ctx, &req, resp.clone()).unwrap();
        assert_eq!(out.headers()[0].1, "http://localhost:8080/feed");
    }
    // The body and the header, each once.
    assert_eq!(compilations() - before, 2);
}

/// A large template that is one block (nothing at the top level to cut between) is
/// compiled with the text inside the block set aside, to what the whole text gives.
#[test]
fn a_large_block_is_compiled_with_its_text_set_aside_to_the_same_template() {
    let in_block =
        |body: &str| rewrite_paths(&format!("{{{{#if request.url}}}}\n{body}\n{{{{/if}}}}"));
    // A tenth of the 250 KB body, against the whole compile (slow whole, as above).
    let tenth: String = {
        let t = big_json_template();
        let end = t[..25_000].rfind(',').expect("a comma");
        in_block(&t[..end])
    };
    assert!(pieces::cuts(&tenth, pieces::PIECE).is_none(), "not cut");
    let set_aside = pieces::compile(&tenth, pieces::PIECE).expect("compiled with its text aside");
    assert_eq!(
        without_positions(&set_aside),
        without_positions(&whole(&tenth))
    );
    // The whole 250 KB in a block renders every expression.
    let big = in_block(&big_json_template());
    assert!(pieces::compile(&big, pieces::PIECE).is_some());
    let out = render_for(&big, &http("GET", "/feed", &[], ""));
    assert_eq!(out.matches("http://localhost:8080/images/").count(), 540);
    assert!(serde_json::from_str::<Value>(&out).is_ok());
}

/// `text` compiled, stored as the bytes decoy's `cache` keeps, and read back: the
/// same template, which renders the same answer to `req`.
fn stored_and_read_back(text: &str, req: &Request) -> String {
    let compiled = compile(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let bytes = cached::to_bytes(&compiled).expect("a template is stored");
    let back = cached::from_bytes(&bytes).expect("and read back");
    assert!(back == compiled, "{text} reads back to another template");
    let model = handlebars::Context::from(
        json!({"request": request_model(req, None), "parameters": {"greeting": "hi"}}),
    );
    let answer = render(&compiled, &model).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(render(&back, &model).expect("it renders"), answer, "{text}");
    answer
}

#[test]
fn a_compiled_template_stored_as_bytes_reads_back_to_the_same_template_and_answer() {
    let req = http(
        "POST",
        "/users/42/orders?status=open&tag=a&tag=b",
        &[("content-type", "application/json")],
        r#"{"name":"Ada","items":[{"id":1},{"id":2}],"total":12.5}"#,
    );
    // Blocks with `else if` chains, paths up (`../`), from the root (`@root`) and
    // local (`@index`), subexpressions, hash arguments, literals of every JSON kind,
    // raw and whitespace-trimming forms, a comment, a section over a missing value.
    let text = r#"{{#each (jsonPath request.body '$.items')}}{{@index}}:{{this.id}}/{{../request.method}}/{{@root.request.path}}{{#unless @last}},{{/unless}}{{/each}}
{{#if (eq request.method 'GET')}}get{{else if (gt 2 1.5)}}else-if{{else}}other{{/if}}
{{jsonPath request.body '$.total'}} {{math 1 '+' 2.5}} {{upper (lower "MiXeD")}} {{size (array 1 true null 'x' -3)}}
{{!-- a comment --}}{{{request.path}}} {{~request.query.status~}} {{#with request.query}}{{status}}{{/with}}
{{#nope}}x{{else}}none{{/nope}} {{lookup request.query.tag 1}} {{parameters.greeting}}
{{#each request.query.tag as |t i|}}{{i}}={{t}};{{/each}} {{stringFormat '%s-%s' 'a' 'b'}} {{jsonPath request.body '$.items[?(@.id > 1)].id'}}"#;
    let answer = stored_and_read_back(text, &req);
    assert!(
        answer.starts_with(
            "0:1/POST//users/42/orders,1:2/POST//users/42/orders\nelse-if\n12.5 3.5 MIXED 5"
        ),
        "{answer}"
    );
    // Partials and decorators (which WireMock's templates do not use) hold the
    // remaining kinds of element: they read back too.
    let all_kinds = "{{> header}}{{#> layout title='t'}}body {{x}}{{/layout}}{{#*inline \"row\"}}r{{/inline}}{{*decorator 1}}";
    let t = handlebars::Template::compile(all_kinds).expect("it compiles");
    let back = cached::from_bytes(&cached::to_bytes(&t).expect("stored")).expect("read back");
    assert!(back == t, "{all_kinds}");
}

#[test]
fn a_250_kb_compiled_template_reads_back_to_the_same_template_and_answer() {
    let req = http("GET", "/feed", &[], "");
    let answer = stored_and_read_back(&big_json_template(), &req);
    assert_eq!(answer.matches("http://localhost:8080/images/").count(), 540);
    let in_block = format!(
        "{{{{#if request.url}}}}\n{}\n{{{{/if}}}}",
        big_json_template()
    );
    let answer = stored_and_read_back(&rewrite_paths(&in_block), &req);
    assert_eq!(answer.matches("http://localhost:8080/images/").count(), 540);
}

/// decoy's `cache` is shared by every instance of the plugin; in native tests it
/// is the thread's, so two `Cache`s on one thread are two instances of one plugin.
#[test]
fn an_instance_reads_a_template_another_compiled_instead_of_compiling_it() {
    decoy_plugin::cache::testing::clear();
    let text = "{{#each request.query.tag}}{{this}};{{/each}}";
    let headers = [("x-sum".to_owned(), "{{math 1 '+' 2}}".to_owned())];
    let (mut first, mut second) = (Cache::default(), Cache::default());
    first.refresh("m", Some(text), &headers).unwrap();
    assert_eq!(first.compilations, 2, "the body and the header");
    second
        .refresh("other mapping", Some(text), &headers)
        .unwrap();
    assert_eq!(second.compilations, 0, "both read from the cache");
    let body = |c: &Cache, m: &str| c.mappings[m].body.as_ref().map(|c| c.template.clone());
    assert!(body(&first, "m") == body(&second, "other mapping"));
    // A text no instance compiled yet is compiled, once.
    second
        .refresh("m", Some("{{upper request.method}}"), &[])
        .unwrap();
    second
        .refresh("n", Some("{{upper request.method}}"), &[])
        .unwrap();
    assert_eq!(second.compilations, 1);
}

/// Bytes under a template's key that are not a template (only a bug could put
/// them there) are compiled over: the answer is never wrong.
#[test]
fn cached_bytes_that_do_not_read_back_are_compiled_over() {
    decoy_plugin::cache::testing::clear();
    let text = "{{#if request.method}}{{upper request.method}}{{/if}}";
    decoy_plugin::cache::put(&cached::cache_key(text), b"\xff not a template");
    let mut compiled = 0;
    let t = compile_shared(text, &mut compiled).unwrap();
    assert_eq!(compiled, 1);
    assert!(t == compile(text).unwrap());
    assert_eq!(
        render_for(text, &http("GET", "/", &[], "")),
        render(
            &t,
            &handlebars::Context::from(json!({"request": {"method": "GET"}}))
        )
        .unwrap()
    );
}

/// decoy's host compiles each template of a stub when the stub loads and puts it
/// in the plugin's `cache` with `decoy_template::cached`: the plugin reads it and
/// compiles nothing.
#[test]
fn a_template_the_host_put_in_the_cache_is_read_and_not_compiled() {
    decoy_plugin::cache::testing::clear();
    let text = "{{#each request.query.tag}}{{this}}={{upper this}};{{/each}}";
    let by_host = decoy_template::compile(text).expect("it compiles");
    decoy_plugin::cache::put(
        &cached::cache_key(text),
        &cached::to_bytes(&by_host).expect("stored"),
    );
    let mut cache = Cache::default();
    cache.refresh("m", Some(text), &[]).unwrap();
    assert_eq!(cache.compilations, 0);
    // What the plugin makes of it depends on its helpers: the same as it compiles.
    let template = cache.mappings["m"].body.as_ref().map(|c| &c.template);
    assert!(template == Some(&compile(text).unwrap()));
    assert!(
        template != Some(&by_host),
        "{{this}} goes through the value helper"
    );
}
