-- wrk script: POST the JSON bodies in the file named by BODIES_FILE (one a line) in turn, each thread
-- starting at its own offset: PostGraphile asked for distinct pages (bench/distinct-pages.ts).
local bodies = {}
for line in io.lines(os.getenv("BODIES_FILE")) do if #line > 0 then bodies[#bodies + 1] = line end end
local counter = 0
local offset = 0
local thread_count = 0
function setup(thread) thread:set("offset", thread_count * 7919); thread_count = thread_count + 1 end
function request()
  counter = counter + 1
  return wrk.format("POST", "/graphql", { ["Content-Type"] = "application/json" }, bodies[((offset + counter) % #bodies) + 1])
end
