-- wrk script: POST the body in the file named by BODY_FILE as JSON (the PostGraphile peer).
local f = io.open(os.getenv("BODY_FILE"), "r"); local body = f:read("*a"); f:close()
wrk.method = "POST"; wrk.body = body; wrk.headers["Content-Type"] = "application/json"
